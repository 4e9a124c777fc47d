package reward

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

func softplus(x float64) float64 { return math.Log1p(math.Exp(x)) }

// The Bradley-Terry loss by hand: pairs (r_c, r_r, m) = (1.5, 0.5, 0) and (−0.2, 0.3, 0.5), so
// z = r_c − r_r − m = 1 and −1 and L = (softplus(−1) + softplus(1))/2; center_rewards_coefficient
// 0.01 adds 0.01·mean((r_c + r_r)²) = 0.01·(2² + 0.1²)/2.
func TestLoss_ByHand(t *testing.T) {
	chosen, rejected, margin := []float64{1.5, -0.2}, []float64{0.5, 0.3}, []float64{0, 0.5}
	const center = 0.01
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		plain := Loss(in[0], in[1], in[2], 0)
		centred := Loss(in[0], in[1], in[2], center)
		g := Gradient(plain, in[0], in[1], in[2])
		return []*Node{plain, centred, g[0], g[1], g[2]}
	}, chosen, rejected, margin)
	want := (softplus(-1) + softplus(1)) / 2
	if got := out[0][0]; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("loss = %.17g, want (softplus(−1) + softplus(1))/2 = %.17g", got, want)
	}
	if got, want := out[1][0], want+center*(4+0.01)/2; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("loss with center_rewards_coefficient = %.17g, want %.17g", got, want)
	}
	// ∂L/∂r_c,i = −σ(−z_i)/B, ∂L/∂r_r,i = +σ(−z_i)/B, ∂L/∂m_i = +σ(−z_i)/B; z = (1, −1).
	sig := func(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
	for i, z := range []float64{1, -1} {
		w := sig(-z) / 2
		if !graphtest.Within(out[2][i], -w, 1e-15) || !graphtest.Within(out[3][i], w, 1e-15) || !graphtest.Within(out[4][i], w, 1e-15) {
			t.Errorf("pair %d: gradients (r_c, r_r, m) = (%v, %v, %v), want (%v, %v, %v)", i, out[2][i], out[3][i], out[4][i], -w, w, w)
		}
	}
}

// At equal rewards the loss is ln 2 whatever the rewards are (a fresh head's step one on identical
// sequences), and stays finite at large reward gaps (softplus form).
func TestLoss_Ln2AndLargeGaps(t *testing.T) {
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		return []*Node{Loss(in[0], in[0], in[2], 0), Loss(in[0], in[1], in[2], 0), Loss(in[1], in[0], in[2], 0)}
	}, []float64{3, -2}, []float64{-500, -500}, []float64{0, 0})
	if got := out[0][0]; !graphtest.Within(got, math.Ln2, 1e-15) {
		t.Errorf("equal rewards: loss = %v, want ln 2", got)
	}
	if got := out[1][0]; !graphtest.Within(got, 0, 1e-15) {
		t.Errorf("chosen far above rejected: loss = %v, want 0", got)
	}
	if got, want := out[2][0], (503+498)/2.0; !graphtest.Within(got, want, 1e-9) {
		t.Errorf("chosen far below rejected: loss = %v, want %v (finite)", got, want)
	}
}

// TRL's metrics: accuracy counts strict wins (a tie is not one), margin is the mean gap, and
// min/mean/max run over all 2B rewards.
func TestMetrics_ByHand(t *testing.T) {
	names := []string{"accuracy", "margin", "min_reward", "mean_reward", "max_reward"}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		m := Metrics(in[0], in[1])
		var outs []*Node
		for _, n := range names {
			outs = append(outs, m[n])
		}
		return outs
	}, []float64{1, 2, 0.5}, []float64{0, 2, 3})
	want := []float64{1.0 / 3, (1 + 0 - 2.5) / 3, 0, (1 + 2 + 0.5 + 0 + 2 + 3) / 6, 3}
	for i, n := range names {
		if got := out[i][0]; !graphtest.Within(got, want[i], 1e-15) {
			t.Errorf("%s = %v, want %v", n, got, want[i])
		}
	}
}
