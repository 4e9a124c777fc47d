package sft

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

// NLL is the mean −log π over completion tokens: each token's gradient is −1/N, padding gets 0
// (and may hold −∞ without producing NaN).
func TestNLL_MaskedMean(t *testing.T) {
	logps := [][]float64{{math.Log(0.4), math.Log(0.5), math.Log(0.8)}, {math.Log(0.4), math.Log(0.8), math.Inf(-1)}}
	mask := [][]bool{{true, true, true}, {true, true, false}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		loss := NLL(in[0], in[1])
		return []*Node{loss, Gradient(loss, in[0])[0]}
	}, logps, mask)
	want := -(math.Log(0.16) + math.Log(0.32)) / 5
	if got := out[0][0]; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("NLL = %v, want %v", got, want)
	}
	for i, w := range []float64{-0.2, -0.2, -0.2, -0.2, -0.2, 0} {
		if got := out[1][i]; !graphtest.Within(got, w, 1e-15) {
			t.Errorf("∂L/∂logp[%d] = %v, want %v", i, got, w)
		}
	}
}

// Gradient accumulation: two micro-batches normalised by the accumulated token count sum to the
// full-batch NLL (value and gradient), where per-micro-batch means would not.
func TestNLLOverTokens_AccumulationEqualsFullBatch(t *testing.T) {
	a := [][]float64{{-0.1, -0.2, -0.3}}
	b := [][]float64{{-1.0, 0}}
	ma, mb := [][]float64{{1, 1, 1}}, [][]float64{{1, 0}}
	full := graphtest.Eval(t, func(in []*Node) []*Node {
		// The full batch padded to T = 3.
		lp := Const(in[0].Graph(), [][]float64{{-0.1, -0.2, -0.3}, {-1.0, 0, 0}})
		m := Const(lp.Graph(), [][]float64{{1, 1, 1}, {1, 0, 0}})
		loss := NLL(lp, m)
		return []*Node{loss}
	}, a)
	micro := graphtest.Eval(t, func(in []*Node) []*Node {
		n := Const(in[0].Graph(), 4.0)
		la, lb := NLLOverTokens(in[0], in[2], n), NLLOverTokens(in[1], in[3], n)
		g := Gradient(Add(la, lb), in[0], in[1])
		return []*Node{Add(la, lb), g[0], g[1], Add(NLL(in[0], in[2]), NLL(in[1], in[3]))}
	}, a, b, ma, mb)
	if got, want := micro[0][0], full[0][0]; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("Σ micro-batch losses = %v, want the full-batch NLL %v", got, want)
	}
	if got, want := micro[3][0], full[0][0]; graphtest.Within(got, want, 1e-3) {
		t.Errorf("per-micro-batch means %v should differ from the full batch %v (the test would not catch the bug)", got, want)
	}
	for i, w := range []float64{-0.25, -0.25, -0.25, -0.25, 0} {
		if got := append(micro[1], micro[2]...)[i]; !graphtest.Within(got, w, 1e-15) {
			t.Errorf("token %d: gradient %v, want −1/4", i, got)
		}
	}
}

// DFT weights each token's −log p by p itself, held constant: on the NLL example the loss is
// −Σ p·log p / 5 and each token's gradient is −p/5, not the −p·(1 + log p)/5 that a weight with
// a gradient would give; padding gets 0 (and may hold −∞ without producing NaN).
func TestDFT_HandCheckWeightHasNoGradient(t *testing.T) {
	p := [][]float64{{0.4, 0.5, 0.8}, {0.4, 0.8, 0}}
	logps := [][]float64{{math.Log(0.4), math.Log(0.5), math.Log(0.8)}, {math.Log(0.4), math.Log(0.8), math.Inf(-1)}}
	mask := [][]bool{{true, true, true}, {true, true, false}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		loss := DFT(in[0], in[1])
		return []*Node{loss, Gradient(loss, in[0])[0]}
	}, logps, mask)
	want := -(2*0.4*math.Log(0.4) + 0.5*math.Log(0.5) + 2*0.8*math.Log(0.8)) / 5 // ≈ 0.3253
	if got := out[0][0]; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("DFT = %v, want %v", got, want)
	}
	for i, w := range []float64{-0.08, -0.1, -0.16, -0.08, -0.16, 0} {
		if got := out[1][i]; !graphtest.Within(got, w, 1e-15) {
			pi := p[i/3][i%3]
			t.Errorf("∂L/∂logp[%d] = %v, want −p/5 = %v (a weight with gradient gives %v)", i, got, w, -pi*(1+math.Log(pi))/5)
		}
	}
}

// Gradient accumulation for DFT, as for NLL: micro-batches normalised by the accumulated token
// count (TRL's num_items_in_batch) sum to the full-batch DFT (value and gradient −p/4), where
// per-micro-batch means would not.
func TestDFTOverTokens_AccumulationEqualsFullBatch(t *testing.T) {
	a := [][]float64{{math.Log(0.9), math.Log(0.5), math.Log(0.2)}}
	b := [][]float64{{math.Log(0.6), 0}}
	ma, mb := [][]float64{{1, 1, 1}}, [][]float64{{1, 0}}
	full := graphtest.Eval(t, func(in []*Node) []*Node {
		g := in[0].Graph()
		lp := Const(g, [][]float64{{math.Log(0.9), math.Log(0.5), math.Log(0.2)}, {math.Log(0.6), 0, 0}})
		return []*Node{DFT(lp, Const(g, [][]float64{{1, 1, 1}, {1, 0, 0}}))}
	}, a)
	micro := graphtest.Eval(t, func(in []*Node) []*Node {
		n := Const(in[0].Graph(), 4.0)
		la, lb := DFTOverTokens(in[0], in[2], n), DFTOverTokens(in[1], in[3], n)
		g := Gradient(Add(la, lb), in[0], in[1])
		return []*Node{Add(la, lb), g[0], g[1], Add(DFT(in[0], in[2]), DFT(in[1], in[3]))}
	}, a, b, ma, mb)
	want := -(0.9*math.Log(0.9) + 0.5*math.Log(0.5) + 0.2*math.Log(0.2) + 0.6*math.Log(0.6)) / 4
	if got := full[0][0]; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("full-batch DFT = %v, want %v", got, want)
	}
	if got := micro[0][0]; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("Σ micro-batch losses = %v, want the full-batch DFT %v", got, want)
	}
	if got := micro[3][0]; graphtest.Within(got, want, 1e-3) {
		t.Errorf("per-micro-batch means %v should differ from the full batch %v (the test would not catch the bug)", got, want)
	}
	for i, w := range []float64{-0.9 / 4, -0.5 / 4, -0.2 / 4, -0.6 / 4, 0} {
		if got := append(micro[1], micro[2]...)[i]; !graphtest.Within(got, w, 1e-15) {
			t.Errorf("token %d: gradient %v, want −p/4 = %v", i, got, w)
		}
	}
}

func TestMeanTokenAccuracy_ArgmaxCorrect(t *testing.T) {
	logits := [][][]float64{{{0.1, 2, 0}, {3, 0, 0}, {0, 0, 1}}}
	targets := [][]int32{{1, 2, 0}} // right, wrong, wrong-but-masked
	mask := [][]bool{{true, true, false}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		c := ArgmaxCorrect(in[0], in[1])
		return []*Node{c, MeanTokenAccuracy(c, in[2])}
	}, logits, targets, mask)
	if got := out[0]; got[0] != 1 || got[1] != 0 || got[2] != 0 {
		t.Errorf("ArgmaxCorrect = %v, want [1 0 0]", got)
	}
	if got := out[1][0]; got != 0.5 {
		t.Errorf("mean_token_accuracy = %v, want 0.5", got)
	}
}

// Entropy of a uniform distribution over V tokens is ln V; a one-hot-like one is ≈ 0; padding is
// ignored.
func TestMeanTokenEntropy(t *testing.T) {
	logits := [][][]float64{{{0, 0, 0, 0}, {50, 0, 0, 0}, {1, 2, 3, 4}}}
	mask := [][]bool{{true, true, false}}
	out := graphtest.Eval(t, func(in []*Node) []*Node { return []*Node{MeanTokenEntropy(in[0], in[1])} }, logits, mask)
	if got, want := out[0][0], math.Log(4)/2; !graphtest.Within(got, want, 1e-12) {
		t.Errorf("entropy = %v, want (ln 4 + 0)/2 = %v", got, want)
	}
}
