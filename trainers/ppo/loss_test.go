package ppo

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// The PPO loss by hand on one row of three response tokens (the third is padding):
//
//	ρ = (1.5, 0.5, 1), A = (1, 1, 0), ε = 0.2
//	max(−Aρ, −A·clip(ρ)) = (max(−1.5, −1.2), max(−0.5, −0.8)) = (−1.2, −0.5) → pg_loss −0.85
//	clipfrac: the clipped term is the larger at token 0 only → 0.5
//	v = (1.0, 0.1), v_old = (0.5, 0), R = (0.6, 0.3), ε_v = 0.2: v_clip = (0.7, 0.1)
//	max((v − R)², (v_clip − R)²) = (max(0.16, 0.01), max(0.04, 0.04)) → vf_loss 0.5·0.1 = 0.05
//	loss = −0.85 + 0.1·0.05 = −0.845
//	approxkl = 0.5·mean((ln 1.5)², (ln 0.5)², 0) over the 3 columns; ratio mean (1.5+0.5+1)/3 = 1
//
// and ∂loss/∂logp_t = −coef_t/2 with coef the course's PPOClipTerm coefficient (식 (7.2): 0 for
// the clipped token 0, ρA = 0.5 for token 1), 0 on padding.
func TestLoss_Hand(t *testing.T) {
	ev, err := step.NewEval(looptest.Backend(t), func(in []*Node) []*Node {
		loss, st := Loss(LossInputs{LogProbs: in[0], OldLogProbs: in[1], Advantages: in[2], VPred: in[3], Values: in[4],
			Returns: in[5], PGMask: in[6], VFMask: in[7], Cols: in[8], Entropy: ZerosLike(in[0])},
			LossParams{Cliprange: 0.2, CliprangeValue: 0.2, VFCoef: 0.1})
		grads := Gradient(loss, in[0], in[3])
		return []*Node{loss, st.PGLoss, st.VFLoss, st.PGClipfrac, st.VFClipfrac, st.ApproxKL, st.Ratio, grads[0], grads[1]}
	})
	if err != nil {
		t.Fatal(err)
	}
	row := func(xs ...float64) [][]float32 {
		out := make([]float32, len(xs))
		for i, x := range xs {
			out[i] = float32(x)
		}
		return [][]float32{out}
	}
	outs, err := ev.Run(row(math.Log(1.5), math.Log(0.5), 1), row(0, 0, 1), row(1, 1, 0), row(1.0, 0.1, 0), row(0.5, 0, 0),
		row(0.6, 0.3, 0), row(1, 1, 0), row(1, 1, 0), row(1, 1, 1))
	if err != nil {
		t.Fatal(err)
	}
	l15, l05 := math.Log(1.5), math.Log(0.5)
	for i, want := range []struct {
		name string
		v    float64
	}{{"loss", -0.845}, {"pg_loss", -0.85}, {"vf_loss", 0.05}, {"pg_clipfrac", 0.5}, {"vf_clipfrac", 0},
		{"approxkl", 0.5 * (l15*l15 + l05*l05) / 3}, {"ratio", 1}} {
		if got := step.ScalarValue(outs[i]); math.Abs(got-want.v) > 1e-6 {
			t.Errorf("%s = %.9g, want %.9g", want.name, got, want.v)
		}
	}
	glp := step.Float64s(outs[7])
	for tok, ratio := range []float64{1.5, 0.5} {
		_, coef := rl.PPOClipTerm(ratio, 1, 0.2)
		if want := -coef / 2; math.Abs(glp[tok]-want) > 1e-6 {
			t.Errorf("∂loss/∂logp[%d] = %.9g, want −PPOClipTerm coef/2 = %.9g", tok, glp[tok], want)
		}
	}
	if glp[2] != 0 {
		t.Errorf("∂loss/∂logp on padding = %g, want 0", glp[2])
	}
	// ∂loss/∂v: token 0 takes the unclipped (v − R)² → 0.1·0.5·2·0.4/2 = 0.02; token 1 (tie,
	// inside the clip range, both terms the same function of v) → 0.1·0.5·2·(−0.2)/2 = −0.01.
	gv := step.Float64s(outs[8])
	for tok, want := range []float64{0.02, -0.01, 0} {
		if math.Abs(gv[tok]-want) > 1e-6 {
			t.Errorf("∂loss/∂v[%d] = %.9g, want %.9g", tok, gv[tok], want)
		}
	}
}

// GAE and whitening as TRL computes them for one row, by hand: rewards (0, 0, 1), values
// (0.5, 0.25, 0), γ = 1, λ = 0.95: δ_t = r_t + V_{t+1} − V_t = (−0.25, −0.25, 1), A_2 = 1,
// A_1 = −0.25 + 0.95·1 = 0.7, A_0 = −0.25 + 0.95·0.7 = 0.415; returns = A + V = (0.915, 0.95, 1).
func TestGAE_TRLRow(t *testing.T) {
	_, adv, ret := rl.GAE([]float64{0, 0, 1}, []float64{0.5, 0.25, 0}, 0, true, 1, 0.95)
	for i, want := range []float64{0.415, 0.7, 1} {
		if math.Abs(adv[i]-want) > 1e-12 {
			t.Errorf("A[%d] = %.17g, want %g", i, adv[i], want)
		}
	}
	for i, want := range []float64{0.915, 0.95, 1} {
		if math.Abs(ret[i]-want) > 1e-12 {
			t.Errorf("returns[%d] = %.17g, want %g", i, ret[i], want)
		}
	}
}

// TRL's rollout processing by hand (pad 9, eos 7, kl_coef 0.1, k1, missing_eos_penalty 1, γ = λ = 1):
//
//	row 0: response 3 7 9 9 → sequence_length 1 (EOS kept, then pads); the score 2 lands at
//	       actual_end = 2 (one past the last token: TRL's padding_mask_p1 rule); log-probs past
//	       index 1 become INVALID_LOGPROB; kl = (−1 − −1.5, 0, 0, 0); values past index 2 are 0.
//	row 1: response 3 4 5 6 → sequence_length 3, no EOS: score 0.5 − 1; actual_end = 3 (the last).
//
// rewards = (−0.05, 0, 2, 0) and (0, 0, 0, −0.5); with γ = λ = 1, returns are the rewards' tail
// sums (1.95, 2, 2, 0) and (−0.5, ...); advantages are whitened over the tokens (mean 0, unbiased
// variance 1 up to the 1e-8) and 0 on padding.
func TestProcess_Hand(t *testing.T) {
	c := DefaultConfig()
	c.KLCoef, c.MissingEOSPenalty, c.Gamma, c.Lam = 0.1, 1, 1, 1
	tr := &Trainer{cfg: c, pad: 9, eos: 7}
	r := &Scored{Width: 4,
		Post:        [][]int32{{3, 7, 9, 9}, {3, 4, 5, 6}},
		LogProbs:    [][]float64{{-1, -2, -3, -4}, {-1, -1, -1, -1}},
		RefLogProbs: [][]float64{{-1.5, -2, -3, -4}, {-1, -1, -1, -1}},
		Values:      [][]float64{{0.1, 0.2, 0.3, 0.4}, {0, 0, 0, 0}},
		Scores:      []float64{2, 0.5},
	}
	r.Queries = make([][]int32, 2)
	if err := tr.process(r); err != nil {
		t.Fatal(err)
	}
	eq := func(name string, got, want []float64) {
		t.Helper()
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-12 {
				t.Errorf("%s = %v, want %v", name, got, want)
				return
			}
		}
	}
	if r.SeqLen[0] != 1 || r.SeqLen[1] != 3 || !r.ContainEOS[0] || r.ContainEOS[1] {
		t.Errorf("sequence lengths %v, EOS %v; want [1 3], [true false]", r.SeqLen, r.ContainEOS)
	}
	eq("scores", r.Scores, []float64{2, -0.5})
	eq("logprobs[0]", r.LogProbs[0], []float64{-1, -2, InvalidLogProb, InvalidLogProb})
	eq("kl[0]", r.KL[0], []float64{0.5, 0, 0, 0})
	eq("values[0]", r.Values[0], []float64{0.1, 0.2, 0.3, 0})
	eq("rewards[0]", r.Rewards[0], []float64{-0.05, 0, 2, 0})
	eq("rewards[1]", r.Rewards[1], []float64{0, 0, 0, -0.5})
	eq("returns[0]", r.Returns[0], []float64{1.95, 2, 2, 0})
	eq("returns[1]", r.Returns[1], []float64{-0.5, -0.5, -0.5, -0.5})
	eq("advantages[0] padding", r.Advantages[0][2:], []float64{0, 0})
	var xs []float64
	xs = append(xs, r.Advantages[0][:2]...)
	xs = append(xs, r.Advantages[1]...)
	if m, v := meanOf(xs), varOf(xs); math.Abs(m) > 1e-12 || math.Abs(v-1) > 1e-7 {
		t.Errorf("whitened advantages %v: mean %g, variance %g; want 0 and 1", xs, m, v)
	}
}
