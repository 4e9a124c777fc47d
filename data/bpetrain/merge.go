package bpetrain

import (
	"container/heap"
	"sort"

	"github.com/posttrain/posttrain/data/tokenizer"
)

// pair is two adjacent token ids, left in the high half: ordering pairs as uint64 orders them by
// (left, right), the order HuggingFace breaks count ties with.
type pair uint64

func pairOf(left, right int32) pair { return pair(uint64(uint32(left))<<32 | uint64(uint32(right))) }
func (p pair) left() int32          { return int32(p >> 32) }
func (p pair) right() int32         { return int32(uint32(p)) }

// learn runs BPE training over words (raw bytes) with their counts until the model vocabulary
// has vocabSize tokens, no pair is left, or the best pair occurs fewer than minFrequency times.
//
// Ids: the 256 ByteLevel symbols in code point order (as HuggingFace sorts its alphabet; for GPT-2's
// byte map this is the order of Qwen's ids 0-255), then each new token in the order it is made.
// Each step merges the pair with the highest count Σ_w count(w)·occurrences(pair, w), ties going
// to the smaller (left id, right id), as BpeTrainer's Merge ordering does.
func learn(words []string, counts []int, vocabSize, minFrequency int) ([]string, [][2]string) {
	tokens, byteID := alphabet()
	ids := make(map[string]int32, vocabSize)
	for i, t := range tokens {
		ids[t] = int32(i)
	}
	st := newState(words, counts, byteID)
	var merges [][2]string
	for len(tokens) < vocabSize && st.queue.Len() > 0 {
		top := heap.Pop(&st.queue).(entry)
		if cur := st.counts[top.pair]; top.count != cur {
			if cur > 0 { // stale: the pair's count fell since it was queued
				heap.Push(&st.queue, entry{top.pair, cur})
			}
			continue
		}
		if top.count < 1 || top.count < minFrequency {
			break
		}
		a, b := tokens[top.pair.left()], tokens[top.pair.right()]
		id, ok := ids[a+b]
		if !ok { // a token can be made by two merges ("a"+"bc", "ab"+"c"); it keeps its first id
			id = int32(len(tokens))
			tokens = append(tokens, a+b)
			ids[a+b] = id
		}
		merges = append(merges, [2]string{a, b})
		st.apply(top.pair, id)
	}
	return tokens, merges
}

// alphabet returns the 256 ByteLevel symbols sorted by code point and the id of each byte.
func alphabet() ([]string, [256]int32) {
	syms := make([]string, 256)
	for b := range 256 {
		syms[b] = tokenizer.ByteLevel(string([]byte{byte(b)}))
	}
	order := make([]int, 256)
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return []rune(syms[order[i]])[0] < []rune(syms[order[j]])[0] })
	tokens := make([]string, 256)
	var byteID [256]int32
	for id, b := range order {
		tokens[id] = syms[b]
		byteID[b] = int32(id)
	}
	return tokens, byteID
}

// state is what training updates after each merge.
type state struct {
	words  [][]int32        // each word's current token ids
	counts map[pair]int     // weighted count of every adjacent pair
	where  map[pair][]int32 // indices of the words a pair may occur in (a superset)
	weight []int            // each word's count
	queue  pairQueue
}

func newState(words []string, counts []int, byteID [256]int32) *state {
	st := &state{counts: map[pair]int{}, where: map[pair][]int32{}, weight: counts}
	st.words = make([][]int32, len(words))
	for i, w := range words {
		syms := make([]int32, len(w))
		for j := 0; j < len(w); j++ {
			syms[j] = byteID[w[j]]
		}
		st.words[i] = syms
		for j := 0; j+1 < len(syms); j++ {
			p := pairOf(syms[j], syms[j+1])
			st.counts[p] += counts[i]
			st.addWhere(p, int32(i))
		}
	}
	for p, c := range st.counts {
		st.queue = append(st.queue, entry{p, c})
	}
	heap.Init(&st.queue)
	return st
}

// addWhere records that word i holds pair p.
func (st *state) addWhere(p pair, i int32) {
	if ws := st.where[p]; len(ws) == 0 || ws[len(ws)-1] != i {
		st.where[p] = append(ws, i)
	}
}

// apply merges every occurrence of p into token id, updates the pair counts and queues the pairs
// whose count grew.
func (st *state) apply(p pair, id int32) {
	grown := map[pair]struct{}{}
	for _, i := range st.where[p] {
		w := st.weight[i]
		st.words[i] = mergeWord(st.words[i], p.left(), p.right(), id, func(q pair, delta int) {
			st.counts[q] += delta * w
			if delta > 0 {
				grown[q] = struct{}{}
				st.addWhere(q, i)
			}
		})
	}
	delete(st.counts, p) // every occurrence is merged
	delete(st.where, p)
	for q := range grown {
		if c := st.counts[q]; c > 0 {
			heap.Push(&st.queue, entry{q, c})
		}
	}
}

// mergeWord replaces each occurrence of (a, b) in syms, left to right, by id, in place, and
// reports the pair count changes around each occurrence as HuggingFace's Word::merge does:
// (prev, a) and (b, next) are lost, (prev, id) and (id, next) are gained.
func mergeWord(syms []int32, a, b, id int32, change func(q pair, delta int)) []int32 {
	out := syms[:0] // writes never pass the reads
	for i := 0; i < len(syms); {
		if i+1 < len(syms) && syms[i] == a && syms[i+1] == b {
			if len(out) > 0 {
				prev := out[len(out)-1]
				change(pairOf(prev, a), -1)
				change(pairOf(prev, id), +1)
			}
			if i+2 < len(syms) {
				next := syms[i+2]
				change(pairOf(b, next), -1)
				change(pairOf(id, next), +1)
			}
			out = append(out, id)
			i += 2
			continue
		}
		out = append(out, syms[i])
		i++
	}
	return out
}

// entry is a queued pair with its count when queued.
type entry struct {
	pair  pair
	count int
}

// pairQueue is a max-heap by count, then by the smaller pair.
type pairQueue []entry

func (q pairQueue) Len() int { return len(q) }
func (q pairQueue) Less(i, j int) bool {
	return q[i].count > q[j].count || q[i].count == q[j].count && q[i].pair < q[j].pair
}
func (q pairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)   { *q = append(*q, x.(entry)) }
func (q *pairQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}
