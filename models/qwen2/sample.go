package qwen2

import (
	"container/heap"
	"math"
	"math/rand/v2"
	"slices"
)

// SampleOptions choose how a next token is drawn from a row of logits, in HF's warper order:
// temperature, then top-k, then top-p.
type SampleOptions struct {
	// Temperature divides the logits; 0 (or less) means greedy: the argmax, ties to the lowest id.
	Temperature float64
	// TopK keeps the TopK largest scaled logits and every logit equal to the TopK-th (HF's
	// TopKLogitsWarper); 0 keeps all.
	TopK int
	// TopP keeps the smallest set of most probable tokens whose probability reaches TopP
	// (HF's TopPLogitsWarper: drop tokens while the ascending cumulative probability is ≤ 1−TopP,
	// always keeping the most probable); 0 or ≥ 1 keeps all.
	TopP float64
}

// Greedy reports whether the options pick the argmax without drawing.
func (o SampleOptions) Greedy() bool { return o.Temperature <= 0 }

// SampleToken picks the next token from logits [V] and returns it with its log-probability
// log softmax(logits/T)[token] over the whole vocabulary (T = 1 when greedy): the model's
// tempered distribution, before top-k/top-p truncation. Math is in float64; rng is used only when
// sampling, one Float64 per call.
func SampleToken(logits []float32, opts SampleOptions, rng *rand.Rand) (token int, logProb float64) {
	temp := opts.Temperature
	if opts.Greedy() {
		temp = 1
	}
	x := make([]float64, len(logits))
	for i, l := range logits {
		x[i] = float64(l) / temp
	}
	lse := logSumExp(x)
	if opts.Greedy() {
		token = argmax64(x)
		return token, x[token] - lse
	}
	usesTopK, usesTopP := opts.TopK > 0 && opts.TopK < len(x), opts.TopP > 0 && opts.TopP < 1
	if !usesTopK && !usesTopP {
		token = drawAll(x, lse, rng.Float64())
		return token, x[token] - lse
	}
	kept := topK(x, opts.TopK)
	if usesTopP {
		kept = topP(x, kept, opts.TopP)
	}
	token = draw(x, kept, rng.Float64())
	return token, x[token] - lse
}

// drawAll is draw over the whole vocabulary, with lse = log Σ exp(x).
func drawAll(x []float64, lse, u float64) int {
	cum := 0.0
	for i, v := range x {
		cum += math.Exp(v - lse)
		if u < cum {
			return i
		}
	}
	return len(x) - 1 // u ≥ the rounded total
}

// logSumExp is log Σ exp(x) computed stably.
func logSumExp(x []float64) float64 {
	m := slices.Max(x)
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return m
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// argmax64 is the index of the largest value, the lowest on ties.
func argmax64(x []float64) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// minHeap holds the k largest values seen so far; its root is the smallest of them.
type minHeap []float64

func (h minHeap) Len() int           { return len(h) }
func (h minHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h minHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *minHeap) Push(v any)        { *h = append(*h, v.(float64)) }
func (h *minHeap) Pop() any          { old := *h; v := old[len(old)-1]; *h = old[:len(old)-1]; return v }

// topK returns the ids (ascending) whose value is ≥ the k-th largest; all ids when k ≤ 0 or ≥ V.
func topK(x []float64, k int) []int {
	if k <= 0 || k >= len(x) {
		ids := make([]int, len(x))
		for i := range ids {
			ids[i] = i
		}
		return ids
	}
	h := make(minHeap, 0, k)
	for _, v := range x {
		if len(h) < k {
			heap.Push(&h, v)
		} else if v > h[0] {
			h[0] = v
			heap.Fix(&h, 0)
		}
	}
	kth := h[0]
	var ids []int
	for i, v := range x {
		if v >= kth {
			ids = append(ids, i)
		}
	}
	return ids
}

// topP returns the ids of kept (ascending) that survive nucleus filtering at p. Probabilities
// are softmax(x) over kept. Only the most probable tokens are sorted: tokens are binned by how far
// their logit is below the maximum (topPBinsPerNat bins per nat), and the least probable bins
// whose total weight stays ≤ 1−p are dropped unsorted — they come first in ascending order and
// their cumulative probability never exceeds 1−p, so HF drops them too.
func topP(x []float64, kept []int, p float64) []int {
	probs := softmaxOver(x, kept)
	xmax := math.Inf(-1)
	for _, i := range kept {
		xmax = max(xmax, x[i])
	}
	bin := func(j int) int { return min(topPBins-1, int((xmax-x[kept[j]])*topPBinsPerNat)) }
	var mass [topPBins]float64
	for j, pr := range probs {
		mass[bin(j)] += pr
	}
	cut, cum := topPBins, 0.0 // bins ≥ cut are dropped; cum is their weight
	for cut > 1 && cum+mass[cut-1] <= 1-p {
		cut--
		cum += mass[cut]
	}
	var cand []int // indices into kept
	for j := range probs {
		if bin(j) < cut {
			cand = append(cand, j)
		}
	}
	// Ascending probability; among equals the higher id first, so lower ids are kept.
	slices.SortFunc(cand, func(a, b int) int {
		if probs[a] != probs[b] {
			if probs[a] < probs[b] {
				return -1
			}
			return 1
		}
		return kept[b] - kept[a]
	})
	var out []int
	for i, j := range cand {
		cum += probs[j]
		if cum > 1-p || i == len(cand)-1 {
			for _, j := range cand[i:] {
				out = append(out, kept[j])
			}
			break
		}
	}
	slices.Sort(out)
	return out
}

// topP's bins: 4 per nat below the largest logit, the last one open-ended (≥ 32 nats below).
const (
	topPBinsPerNat = 4
	topPBins       = 128
)

// softmaxOver is softmax(x[ids]) in ids order.
func softmaxOver(x []float64, ids []int) []float64 {
	m := math.Inf(-1)
	for _, i := range ids {
		m = max(m, x[i])
	}
	p := make([]float64, len(ids))
	z := 0.0
	for j, i := range ids {
		p[j] = math.Exp(x[i] - m)
		z += p[j]
	}
	for j := range p {
		p[j] /= z
	}
	return p
}

// draw picks from softmax(x[kept]) by inverse CDF over kept in ascending id order, u in [0,1).
func draw(x []float64, kept []int, u float64) int {
	probs := softmaxOver(x, kept)
	cum := 0.0
	for j, pr := range probs {
		cum += pr
		if u < cum {
			return kept[j]
		}
	}
	return kept[len(kept)-1] // u ≥ the rounded total
}

// rowRand is the random stream of batch row r for a seed: rows draw independently of each other
// and of the batch size, so a row's sample depends only on (seed, row, its own logits).
func rowRand(seed uint64, row int) *rand.Rand {
	return rand.New(rand.NewPCG(splitMix64(seed), splitMix64(seed^splitMix64(uint64(row)+1))))
}

// splitMix64 is SplitMix64's output function, to decorrelate nearby seeds.
func splitMix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
