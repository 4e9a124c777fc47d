package dpo

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

// Two pairs, rows [c0, c1, r0, r1] of T = 4 (column 0 is the prompt). With TRL's roll the
// log-prob term skips each row's last completion token; the q term (log Σ p²) counts them all.
//
//	c0: m = [0 1 1 1], lp = [·, ln½, ln¼, ln⅒], q = ln½ each: (ln½ + ln¼ − 3·ln½)/3 = 0
//	r0: m = [0 0 1 1], lp = [·, ·, ln½, ln⅕], q = ln¼ each: (ln½ − 2·ln¼)/2 = ln 8 / 2
//	→ weight = min(e^{0 + ln8/2}, 1) = 1 (clamped)
//	c1: m = [0 1 1 1], lp = [·, ln½, ln⅛, ·], q = ln½: (ln½ + ln⅛ − 3·ln½)/3 = −ln2/3
//	r1: m = [0 1 1 0], lp = [·, ln¼, ln⅓, ·], q = 0 (one-hot): ln¼ / 2 = −ln 2
//	→ weight = e^{−ln2/3 − ln2} = 2^{−4/3}
func TestWPOWeights_HandCheck(t *testing.T) {
	ln := math.Log
	inf := math.Inf(-1) // off-completion log-probs may be anything, −∞ included
	lp := [][]float64{
		{inf, ln(0.5), ln(0.25), ln(0.1)},
		{inf, ln(0.5), ln(0.125), -7},
		{inf, inf, ln(0.5), ln(0.2)},
		{inf, ln(0.25), ln(1.0 / 3), inf},
	}
	q := [][]float64{
		{0, ln(0.5), ln(0.5), ln(0.5)},
		{0, ln(0.5), ln(0.5), ln(0.5)},
		{0, 0, ln(0.25), ln(0.25)},
		{0, 0, 0, 0},
	}
	scored := [][]float64{{0, 1, 1, 1}, {0, 1, 1, 1}, {0, 0, 1, 1}, {0, 1, 1, 0}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		w := WPOWeights(in[0], in[1], in[2])
		return []*Node{w, Gradient(ReduceAllSum(w), in[0])[0]}
	}, lp, q, scored)
	for i, want := range []float64{1, math.Pow(2, -4.0/3)} {
		if got := out[0][i]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("pair %d: weight = %.16g, want %.16g", i, got, want)
		}
	}
	for i, g := range out[1] {
		if g != 0 {
			t.Fatalf("∂weight/∂lp[%d] = %v, want 0 (TRL: no_grad)", i, g)
		}
	}
}

// Weighted multiplies each pair's loss by its weight before the mean: [2, 4]·[1, ¼] → (2 + 1)/2.
func TestWeighted_PerPairThenMean(t *testing.T) {
	out := graphtest.Eval(t, func(in []*Node) []*Node { return []*Node{Weighted(in[0], in[1])} },
		[]float64{2, 4}, []float64{1, 0.25})
	if got := out[0][0]; got != 1.5 {
		t.Errorf("Weighted = %v, want 1.5", got)
	}
}
