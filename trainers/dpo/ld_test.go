package dpo

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

// Two pairs, rows [c0, c1, r0, r1] of T = 6 columns, per-token log-probs lp_t = −t (column t),
// α = ½. Pair 0: prompt of 1 token, chosen completion in columns 1-4 (l = 4), rejected in 1-2
// (l = 2), so l_p = 2: chosen = lp1 + ½(lp2 + lp3) = −1 − 2.5 = −3.5 (column 4 is ≥ l: dropped),
// rejected = lp1 = −1. Pair 1: prompt of 3 tokens, chosen in 3-5 (l = 3), rejected in 3 (l = 1),
// l_p = 1: chosen = ½·(lp1 + lp2) over columns 1-2, which hold prompt tokens (0) → 0; rejected:
// columns < 1 → 0. TRL counts columns from the row's start, prompt included.
func TestLDLogProbs_TRLColumns(t *testing.T) {
	lp := []float64{0, -1, -2, -3, -4, -5}
	rows := [][]float64{lp, lp, lp, lp}
	scored := [][]float64{
		{0, 1, 1, 1, 1, 0},
		{0, 0, 0, 1, 1, 1},
		{0, 1, 1, 0, 0, 0},
		{0, 0, 0, 1, 0, 0},
	}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		ld := LDLogProbs(in[0], in[1], 0.5)
		return []*Node{ld, Gradient(ReduceAllSum(ld), in[0])[0]}
	}, rows, scored)
	for i, want := range []float64{-3.5, 0, -1, 0} {
		if got := out[0][i]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("row %d: LD log-prob = %v, want %v", i, got, want)
		}
	}
	// ∂/∂lp of the chosen row of pair 0: column 1 → 1, 2-3 → α, 4 (past l) → 0, prompt/padding → 0.
	for col, want := range []float64{0, 1, 0.5, 0.5, 0, 0} {
		if got := out[1][col]; got != want {
			t.Errorf("∂/∂lp[0][%d] = %v, want %v", col, got, want)
		}
	}
	// α = 1 with no prompt-vs-length clipping (prompt of 1, completions ≥ columns) is the plain sum
	// over columns < l: pair 0's chosen = lp1+lp2+lp3 = −6 (column 4 still dropped).
	out = graphtest.Eval(t, func(in []*Node) []*Node { return []*Node{LDLogProbs(in[0], in[1], 1)} }, rows, scored)
	if got := out[0][0]; got != -6 || math.IsNaN(out[0][2]) {
		t.Errorf("α = 1: chosen = %v, want −6", got)
	}
}
