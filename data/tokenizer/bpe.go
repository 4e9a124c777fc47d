package tokenizer

import (
	"sync"
	"unicode/utf8"
)

// merge is one BPE merge rule: the pair it applies to becomes token id; lower rank merges first.
type merge struct{ rank, id int32 }

func pairKey(left, right int32) uint64 { return uint64(uint32(left))<<32 | uint64(uint32(right)) }

// model is the BPE model of tokenizer.json ("model": {"type": "BPE", ...}). Over the ByteLevel
// alphabet (byteLevel), a word's bytes start as single-byte tokens; otherwise (SentencePiece-style,
// Gemma) its characters do, a character missing from the vocabulary becoming its <0xNN> byte
// tokens (byte_fallback) or the unknown token. The symbols are then merged pairwise by rank.
type model struct {
	vocab        map[string]int   // token (ByteLevel spelling when byteLevel) → id
	tokens       []string         // id → token; "" where no token has that id
	merges       map[uint64]merge // pairKey(left, right) → rule
	byteLevel    bool             // words are raw bytes mapped to the ByteLevel alphabet
	byteIDs      [256]int32       // byteLevel: id of each byte's one-rune token; else of <0xNN> (-1: none)
	asciiIDs     [128]int32       // !byteLevel: id of each ASCII character's token (-1: none)
	byteFallback bool             // !byteLevel: unknown characters become <0xNN> tokens
	unk          int32            // id of the unknown token (-1: none; unknown characters are dropped)
	fuseUnk      bool             // consecutive unknown characters give one unknown token
	ignoreMerges bool             // a word found whole in vocab is one token (BPE.ignore_merges)
	cache        *wordCache
}

// encodeWord appends the ids of one pre-tokenized word (raw bytes, before the ByteLevel mapping).
func (m *model) encodeWord(word string, dst []int) []int {
	if len(word) == 1 && m.byteLevel {
		if id := m.byteIDs[word[0]]; id >= 0 {
			dst = append(dst, int(id))
		}
		return dst
	}
	if ids, ok := m.cache.get(word); ok {
		for _, id := range ids {
			dst = append(dst, int(id))
		}
		return dst
	}
	var ids []int32
	if id, ok := m.wholeWord(word); ok {
		ids = []int32{int32(id)}
	} else {
		ids = m.mergeWord(m.symbols(word))
	}
	m.cache.put(word, ids)
	for _, id := range ids {
		dst = append(dst, int(id))
	}
	return dst
}

// wholeWord returns the id of word as one token when ignore_merges is set and vocab has it.
func (m *model) wholeWord(word string) (int, bool) {
	if !m.ignoreMerges {
		return 0, false
	}
	if m.byteLevel {
		word = byteLevelString(word)
	}
	id, ok := m.vocab[word]
	return id, ok
}

// symbols returns the ids a word starts from, before any merge: its bytes' tokens (byteLevel), or
// its characters' tokens with HuggingFace's BPE::merge_word rules for missing characters.
func (m *model) symbols(word string) []int32 {
	ids := make([]int32, 0, len(word))
	if m.byteLevel {
		for i := 0; i < len(word); i++ {
			if id := m.byteIDs[word[i]]; id >= 0 { // a byte without a token is dropped (see buildModel)
				ids = append(ids, id)
			}
		}
		return ids
	}
	pendingUnk := false
	for i := 0; i < len(word); {
		var id int32 = -1
		var w int
		if c := word[i]; c < utf8.RuneSelf {
			id, w = m.asciiIDs[c], 1
		} else {
			_, w = utf8.DecodeRuneInString(word[i:])
			if v, ok := m.vocab[word[i:i+w]]; ok {
				id = int32(v)
			}
		}
		ch := word[i : i+w]
		i += w
		if id >= 0 {
			if pendingUnk {
				ids, pendingUnk = append(ids, m.unk), false
			}
			ids = append(ids, id)
			continue
		}
		if m.byteFallback && m.hasByteTokens(ch) {
			for k := 0; k < len(ch); k++ {
				ids = append(ids, m.byteIDs[ch[k]])
			}
			continue // a pending unknown token stays pending, as in HuggingFace
		}
		if m.unk < 0 {
			continue
		}
		if pendingUnk && !m.fuseUnk {
			ids = append(ids, m.unk)
		}
		pendingUnk = true
	}
	if pendingUnk {
		ids = append(ids, m.unk)
	}
	return ids
}

func (m *model) hasByteTokens(ch string) bool {
	for k := 0; k < len(ch); k++ {
		if m.byteIDs[ch[k]] < 0 {
			return false
		}
	}
	return true
}

// symbol is one token of a word during merging, linked to its live neighbours.
type symbol struct {
	id, prev, next int32 // prev/next: index of the neighbour, -1 at the ends
	gone           bool  // merged into its left neighbour
}

// candidate is a pair waiting in the merge queue: the pair (pos, next of pos) becomes id.
type candidate struct{ rank, pos, id int32 }

// mergeWord applies the merges to a word's symbols as HuggingFace's Word::merge_all does: a priority queue
// ordered by (rank, position); a popped pair that no longer exists, or whose rule changed, is
// skipped; after each merge the pairs with the new token's neighbours are queued.
func (m *model) mergeWord(init []int32) []int32 {
	if len(init) == 0 {
		return nil
	}
	syms := make([]symbol, len(init))
	for i := range syms {
		syms[i] = symbol{id: init[i], prev: int32(i - 1), next: int32(i + 1)}
	}
	syms[len(syms)-1].next = -1
	q := make(mergeQueue, 0, len(init))
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q.push(candidate{mg.rank, int32(i), mg.id})
		}
	}
	for len(q) > 0 {
		top := q.pop()
		s := &syms[top.pos]
		if s.gone || s.next < 0 {
			continue
		}
		right := syms[s.next]
		if mg, ok := m.merges[pairKey(s.id, right.id)]; !ok || mg.id != top.id {
			continue // stale entry
		}
		s.id = top.id
		syms[s.next].gone = true
		s.next = right.next
		if right.next >= 0 {
			syms[right.next].prev = top.pos
		}
		if s.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[s.prev].id, s.id)]; ok {
				q.push(candidate{mg.rank, s.prev, mg.id})
			}
		}
		if s.next >= 0 {
			if mg, ok := m.merges[pairKey(s.id, syms[s.next].id)]; ok {
				q.push(candidate{mg.rank, top.pos, mg.id})
			}
		}
	}
	var ids []int32
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, syms[i].id)
	}
	return ids
}

// mergeQueue is a binary min-heap of candidates by (rank, pos).
type mergeQueue []candidate

func (c candidate) less(o candidate) bool {
	return c.rank < o.rank || c.rank == o.rank && c.pos < o.pos
}

func (q *mergeQueue) push(c candidate) {
	h := append(*q, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *mergeQueue) pop() candidate {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, r, min := 2*i+1, 2*i+2, i
		if l < n && h[l].less(h[min]) {
			min = l
		}
		if r < n && h[r].less(h[min]) {
			min = r
		}
		if min == i {
			break
		}
		h[i], h[min] = h[min], h[i]
		i = min
	}
	*q = h
	return top
}

// wordCache remembers the ids of words already merged. It is safe for concurrent use and is
// emptied when it reaches maxCachedWords, so memory stays bounded on endless distinct input.
type wordCache struct {
	mu    sync.RWMutex
	words map[string][]int32
}

const (
	maxCachedWords   = 1 << 17
	maxCachedWordLen = 256 // bytes; longer words are rare and not worth keeping
)

func newWordCache() *wordCache { return &wordCache{words: make(map[string][]int32)} }

func (c *wordCache) get(word string) ([]int32, bool) {
	if len(word) > maxCachedWordLen {
		return nil, false
	}
	c.mu.RLock()
	ids, ok := c.words[word]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	if len(word) > maxCachedWordLen {
		return
	}
	c.mu.Lock()
	if len(c.words) >= maxCachedWords {
		clear(c.words)
	}
	c.words[string([]byte(word))] = ids // copy: word may point into a large input string
	c.mu.Unlock()
}
