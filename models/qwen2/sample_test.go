package qwen2

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// hfTopP is HF's TopPLogitsWarper by the book: sort ascending, drop while the cumulative
// probability is ≤ 1−p, keep the most probable. It returns the kept ids ascending.
func hfTopP(x []float64, kept []int, p float64) []int {
	probs := softmaxOver(x, kept)
	order := make([]int, len(kept))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		if probs[order[a]] != probs[order[b]] {
			return probs[order[a]] < probs[order[b]]
		}
		return kept[order[a]] > kept[order[b]]
	})
	var out []int
	cum := 0.0
	for i, j := range order {
		cum += probs[j]
		if cum > 1-p || i == len(order)-1 {
			out = append(out, kept[j])
		}
	}
	slices.Sort(out)
	return out
}

func TestTopP_MatchesFullSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 300 {
		v := 1 + rng.IntN([]int{30, 300, 5000}[trial%3])
		x := make([]float64, v)
		scale := []float64{0.1, 1, 5, 20}[trial%4]
		for i := range x {
			x[i] = rng.NormFloat64() * scale
			if trial%5 == 0 { // ties, and logits on topP's bin edges
				x[i] = math.Round(x[i]*4) / 4
			}
		}
		all := topK(x, 0)
		for _, p := range []float64{0.01, 0.5, 0.9, 0.95, 0.999} {
			if got, want := topP(x, all, p), hfTopP(x, all, p); !slices.Equal(got, want) {
				t.Fatalf("trial %d V=%d p=%g: got %v, want %v", trial, v, p, got, want)
			}
		}
	}
}

func TestTopK_KeepsTies(t *testing.T) {
	x := []float64{1, 3, 2, 3, 0, 2}
	for _, c := range []struct {
		k    int
		want []int
	}{{1, []int{1, 3}}, {2, []int{1, 3}}, {3, []int{1, 2, 3, 5}}, {0, []int{0, 1, 2, 3, 4, 5}}, {6, []int{0, 1, 2, 3, 4, 5}}} {
		if got := topK(x, c.k); !slices.Equal(got, c.want) {
			t.Errorf("k=%d: got %v, want %v", c.k, got, c.want)
		}
	}
}

func TestSampleToken_Greedy(t *testing.T) {
	tok, lp := SampleToken([]float32{0, 2, 1, 2}, SampleOptions{}, nil)
	want := 2 - math.Log(1+2*math.E*math.E+math.E)
	if tok != 1 || math.Abs(lp-want) > 1e-12 {
		t.Errorf("got token %d log-prob %v, want 1 (lowest of the tied maxima) and %v", tok, lp, want)
	}
}

// Draws follow the truncated, renormalized distribution; the log-prob is the tempered one.
func TestSampleToken_Frequencies(t *testing.T) {
	logits := []float32{2, 1, 0, -1, -8}
	x := []float64{1, 0.5, 0, -0.5, -4} // logits / T
	lse := logSumExp(x)
	for _, c := range []struct {
		opts SampleOptions
		kept int // the first kept tokens are sampled
	}{{SampleOptions{Temperature: 2, TopK: 3}, 3}, {SampleOptions{Temperature: 2}, 5}, {SampleOptions{Temperature: 2, TopP: 0.6}, 2}} {
		keptZ := 0.0
		for i := range c.kept {
			keptZ += math.Exp(x[i])
		}
		rng := rand.New(rand.NewPCG(5, 6))
		counts := make([]int, len(logits))
		const n = 200000
		for range n {
			tok, lp := SampleToken(logits, c.opts, rng)
			counts[tok]++
			if math.Abs(lp-(x[tok]-lse)) > 1e-12 {
				t.Fatalf("%+v token %d: log-prob %v, want %v", c.opts, tok, lp, x[tok]-lse)
			}
		}
		for i, cnt := range counts {
			want := 0.0
			if i < c.kept {
				want = math.Exp(x[i]) / keptZ
			}
			if got := float64(cnt) / n; math.Abs(got-want) > 0.005 {
				t.Errorf("%+v token %d: frequency %.4f, want %.4f", c.opts, i, got, want)
			}
		}
	}
}

func TestRowRand_Independent(t *testing.T) {
	a, b, a2 := rowRand(1, 0), rowRand(1, 1), rowRand(1, 0)
	x, y, z := a.Uint64(), b.Uint64(), a2.Uint64()
	if x == y || x != z || rowRand(2, 0).Uint64() == x {
		t.Errorf("streams: (1,0)=%x (1,1)=%x (1,0) again=%x", x, y, z)
	}
}
