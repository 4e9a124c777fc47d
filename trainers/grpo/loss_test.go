package grpo

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// Phase 12's group: 12⏎, 7⏎, 1⏎, 12⏎ for 3×4= under the SFT TinyLM, padded to T = 3.
var (
	groupLogps = [][]float64{
		{math.Log(0.4), math.Log(0.5), math.Log(0.8)},
		{math.Log(0.4), math.Log(0.8), 0},
		{math.Log(0.4), math.Log(0.3), 0},
		{math.Log(0.4), math.Log(0.5), math.Log(0.8)},
	}
	groupMask = [][]float64{{1, 1, 1}, {1, 1, 0}, {1, 1, 0}, {1, 1, 1}}
)

// courseAdvantages is the course's group_advantages (식 (11.1), (12.1)); population std, eps 1e-4.
func courseAdvantages(rewards []float64, mode string) []float64 {
	n := float64(len(rewards))
	var sum float64
	for _, r := range rewards {
		sum += r
	}
	mean := sum / n
	var ss float64
	for _, r := range rewards {
		ss += (r - mean) * (r - mean)
	}
	std := math.Sqrt(ss / n)
	out := make([]float64, len(rewards))
	for i, r := range rewards {
		switch mode {
		case "rloo":
			out[i] = r - (sum-r)/(n-1)
		case "mean":
			out[i] = r - mean
		default:
			out[i] = (r - mean) / (std + 1e-4)
		}
	}
	return out
}

// ascent returns −∂L/∂logps (the course's "coefficient × weight" per token) and the loss.
func ascent(t *testing.T, logps, old, ref, mask [][]float64, adv []float64, p Params, ratio Ratio, agg Aggregation) (loss float64, grad []float64) {
	t.Helper()
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		var refNode *Node
		if p.Beta != 0 {
			refNode = in[2]
		}
		l, _ := Loss(Inputs{LogProbs: in[0], OldLogProbs: in[1], RefLogProbs: refNode, Mask: in[3], Advantages: in[4]}, p, ratio, agg)
		return []*Node{l, Neg(Gradient(l, in[0])[0])}
	}, logps, old, ref, mask, adv)
	return out[0][0], out[1]
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Phase 12 hand_check: the weight each token gets at ratio 1 (first update), β = 0.
//
//	GRPO (std, 응답별 평균)        [0.0833, -0.125, -0.125, 0.0833]
//	DAPO (std, 전체 토큰 평균)      [0.1, -0.1, -0.1, 0.1]
//	Dr. GRPO (평균만, 상수 분모)     [0.0417, -0.0417, -0.0417, 0.0417]
//	RLOO (나 뺀 평균, 응답별 평균)   [0.0556, -0.0833, -0.0833, 0.0556]
func TestGRPOLoss_TokenWeightsTable(t *testing.T) {
	rewards := []float64{1, 0, 0, 1}
	lengths := []float64{3, 2, 2, 3}
	p := Params{EpsLow: 0.2, EpsHigh: 0.2}
	for _, c := range []struct {
		name   string
		adv    string
		agg    Aggregation
		weight func(a, l float64) float64
		course []float64
	}{
		{"GRPO", "std", GRPOMean, func(a, l float64) float64 { return a / (4 * l) }, []float64{0.0833, -0.125, -0.125, 0.0833}},
		{"DAPO", "std", BNPOMean, func(a, l float64) float64 { return a / 10 }, []float64{0.1, -0.1, -0.1, 0.1}},
		{"Dr. GRPO", "mean", DrGRPOMean(3), func(a, l float64) float64 { return a / (4 * 3) }, []float64{0.0417, -0.0417, -0.0417, 0.0417}},
		{"RLOO", "rloo", GRPOMean, func(a, l float64) float64 { return a / (4 * l) }, []float64{0.0556, -0.0833, -0.0833, 0.0556}},
	} {
		adv := courseAdvantages(rewards, c.adv)
		// old = logps: ratio exactly 1, as at the first update of each iteration.
		_, grad := ascent(t, groupLogps, groupLogps, groupLogps, groupMask, adv, p, TokenRatio, c.agg)
		for i := range rewards {
			want := c.weight(adv[i], lengths[i])
			for tok := 0; tok < 3; tok++ {
				got := grad[i*3+tok]
				if tok >= int(lengths[i]) {
					if got != 0 {
						t.Errorf("%s: response %d padding token %d got weight %v, want 0", c.name, i, tok, got)
					}
					continue
				}
				if !graphtest.Within(got, want, 1e-15) || round4(got) != c.course[i] {
					t.Errorf("%s: response %d token %d weight %v, want %v (course prints %v)", c.name, i, tok, got, want, c.course[i])
				}
			}
		}
	}
}

// courseCoefficients re-states the course's grpo_loss_grads (phase 11/12) on the host: the ascent
// coefficient × weight of each token, for agg ∈ {seq_mean, token_mean, const} and ratio levels.
func courseCoefficients(logps, old, ref, mask [][]float64, adv []float64, p Params, sequence bool, agg string) []float64 {
	G := float64(len(logps))
	var total float64
	for _, m := range mask {
		for _, x := range m {
			total += x
		}
	}
	out := make([]float64, 0, len(logps)*len(logps[0]))
	for i := range logps {
		var L, sumLog float64
		for tok := range logps[i] {
			if mask[i][tok] != 0 {
				L++
				sumLog += logps[i][tok] - old[i][tok]
			}
		}
		for tok := range logps[i] {
			if mask[i][tok] == 0 {
				out = append(out, 0)
				continue
			}
			ratio := math.Exp(logps[i][tok] - old[i][tok])
			if sequence {
				ratio = math.Exp(sumLog / L)
			}
			A := adv[i]
			clipped := (A > 0 && ratio > 1+p.EpsHigh) || (A < 0 && ratio < 1-p.EpsLow)
			coef := ratio * A
			if clipped {
				coef = 0
			}
			coef += -p.Beta * (1 - math.Exp(ref[i][tok]-logps[i][tok]))
			w := map[string]float64{"seq_mean": 1 / (G * L), "token_mean": 1 / total, "const": 1 / (G * 3)}[agg]
			out = append(out, coef*w)
		}
	}
	return out
}

// Autodiff of the graph loss gives exactly the course's hand-written coefficients (clipped → 0,
// else ratio·A; KL −β(1 − π_ref/π)), off-policy, for every aggregation and both ratio levels.
func TestGRPOLoss_GradientIsCourseCoefficient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const B, T = 6, 3
	mask := [][]float64{{1, 1, 1}, {1, 1, 0}, {1, 0, 0}, {1, 1, 1}, {1, 1, 0}, {1, 1, 1}}
	logps, old, ref := make([][]float64, B), make([][]float64, B), make([][]float64, B)
	for i := range B {
		logps[i], old[i], ref[i] = make([]float64, T), make([]float64, T), make([]float64, T)
		for tok := range T {
			logps[i][tok] = -2 * rng.Float64()
			old[i][tok] = logps[i][tok] + 1.6*(rng.Float64()-0.5) // ratios in ≈[0.45, 2.2]: some clipped
			ref[i][tok] = -2 * rng.Float64()
		}
	}
	adv := []float64{1.2, -0.7, 0.4, -1.5, 0.9, -0.3}
	p := Params{EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.04}
	for _, c := range []struct {
		name     string
		ratio    Ratio
		sequence bool
		agg      Aggregation
		course   string
	}{
		{"grpo/token", TokenRatio, false, GRPOMean, "seq_mean"},
		{"bnpo/token", TokenRatio, false, BNPOMean, "token_mean"},
		{"dapo/token", TokenRatio, false, nil, "token_mean"},
		{"dr_grpo/token", TokenRatio, false, DrGRPOMean(3), "const"},
		{"grpo/sequence (GSPO)", SequenceRatio, true, GRPOMean, "seq_mean"},
		{"bnpo/sequence", SequenceRatio, true, BNPOMean, "token_mean"},
		{"dr_grpo/sequence", SequenceRatio, true, DrGRPOMean(3), "const"},
	} {
		agg := c.agg
		if c.name == "dapo/token" { // the accumulated batch is this batch: N = 14 tokens
			agg = func(perToken, m *Node) *Node {
				return DAPOMean(Scalar(perToken.Graph(), perToken.DType(), 14))(perToken, m)
			}
		}
		_, got := ascent(t, logps, old, ref, mask, adv, p, c.ratio, agg)
		want := courseCoefficients(logps, old, ref, mask, adv, p, c.sequence, c.course)
		clippedSeen := false
		for i := range want {
			if !graphtest.Within(got[i], want[i], 1e-15) {
				t.Errorf("%s: token %d: −∂L/∂logp = %v, course coefficient %v", c.name, i, got[i], want[i])
			}
			if mask[i/T][i%T] != 0 && math.Abs(want[i]-courseCoefficients(logps, old, ref, mask, adv, Params{EpsLow: 9, EpsHigh: 9, Beta: p.Beta}, c.sequence, c.course)[i]) > 1e-12 {
				clippedSeen = true
			}
		}
		if !clippedSeen {
			t.Errorf("%s: no token was clipped; the test does not exercise clipping", c.name)
		}
	}
}

// Phase 12 hand_check: token log-ratios [0.10, −0.05, 0.02] → GSPO sequence ratio 1.0236 (the
// geometric mean), token ratios [1.1052, 0.9512, 1.0202]; every token of the sequence gets
// ∂s/∂log π_t = s/|y|.
func TestSequenceRatio_GeometricMean(t *testing.T) {
	logr := [][]float64{{0.10, -0.05, 0.02}}
	zeros := [][]float64{{0, 0, 0}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		s := SequenceRatio(in[0], in[1], in[2])
		return []*Node{s, TokenRatio(in[0], in[1], in[2]), Gradient(ReduceAllSum(s), in[0])[0]}
	}, logr, zeros, [][]float64{{1, 1, 1}})
	s := math.Exp(0.07 / 3)
	if got := out[0][0]; !graphtest.Within(got, s, 1e-15) || !graphtest.Within(got, 1.02360, 1e-4) || len(out[0]) != 1 {
		t.Errorf("sequence ratio = %v, want exp(mean log ratio) = %v (course 1.0236), shape [1,1]", out[0], s)
	}
	for i, want := range []float64{1.1052, 0.9512, 1.0202} {
		if got := out[1][i]; round4(got) != want {
			t.Errorf("token ratio %d = %v, want %v", i, got, want)
		}
		if got := out[2][i]; !graphtest.Within(got, s/3, 1e-15) {
			t.Errorf("∂s/∂log π_%d = %v, want s/|y| = %v", i, got, s/3)
		}
	}
}

// TRL #2995: with β = 0 and μ = 1 (old = detached current log-probs) the ratio is 1 and the loss
// is −mean(A) = 0 for a zero-mean group of equal lengths, yet the gradient is A·w ≠ 0.
func TestGRPOLoss_ZeroLossNonZeroGradient(t *testing.T) {
	logps := [][]float64{{-0.5, -1}, {-0.2, -0.3}, {-1.5, -0.1}, {-0.7, -0.9}}
	mask := [][]float64{{1, 1}, {1, 1}, {1, 1}, {1, 1}}
	adv := []float64{1, -1, 1, -1}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		l, _ := Loss(Inputs{LogProbs: in[0], OldLogProbs: StopGradient(in[0]), Mask: in[1], Advantages: in[2]},
			Params{EpsLow: 0.2, EpsHigh: 0.2}, TokenRatio, GRPOMean)
		return []*Node{l, Neg(Gradient(l, in[0])[0])}
	}, logps, mask, adv)
	if got := out[0][0]; got != 0 {
		t.Errorf("loss = %v, want exactly 0", got)
	}
	for i, got := range out[1] {
		if want := adv[i/2] / 8; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("token %d: −∂L/∂logp = %v, want A/(G·|y|) = %v", i, got, want)
		}
	}
}

// A group whose rewards are all equal has zero advantages: no gradient at all (β = 0).
func TestGRPOLoss_ZeroAdvantageGroupHasZeroGradient(t *testing.T) {
	adv := courseAdvantages([]float64{1, 1, 1, 1}, "std")
	old := [][]float64{{-0.3, -0.6, -0.1}, {-0.6, -0.2, 0}, {-0.7, -1.5, 0}, {-1.1, -0.5, -0.4}}
	for _, ratio := range []Ratio{TokenRatio, SequenceRatio} {
		loss, grad := ascent(t, groupLogps, old, groupLogps, groupMask, adv, Params{EpsLow: 0.2, EpsHigh: 0.2}, ratio, GRPOMean)
		if loss != 0 {
			t.Errorf("loss = %v, want 0", loss)
		}
		for i, g := range grad {
			if g != 0 {
				t.Errorf("token %d: gradient %v, want 0", i, g)
			}
		}
	}
}

// dr_grpo divides by B·max_completion_length whatever the lengths; dapo by the given global
// count, so accumulated micro-batches reproduce bnpo on the full batch.
func TestAggregations_Denominators(t *testing.T) {
	ones := [][]float64{{1, 1, 1}, {1, 1, 1}}
	mask := [][]float64{{1, 1, 1}, {1, 1, 0}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		n := Scalar(in[0].Graph(), in[0].DType(), 10)
		return []*Node{DrGRPOMean(4)(in[0], in[1]), BNPOMean(in[0], in[1]), GRPOMean(in[0], in[1]), DAPOMean(n)(in[0], in[1])}
	}, ones, mask)
	for i, want := range []float64{5.0 / (2 * 4), 1, 1, 5.0 / 10} {
		if got := out[i][0]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("aggregation %d = %v, want %v", i, got, want)
		}
	}
	// Micro-batches {row 0, row 1} with DAPO's N = 5 sum to BNPO of the whole batch.
	x := [][]float64{{0.3, -1.2, 0.5}, {2.0, 0.7, 9.9}}
	full := graphtest.Eval(t, func(in []*Node) []*Node { return []*Node{BNPOMean(in[0], in[1])} }, x, mask)
	micro := graphtest.Eval(t, func(in []*Node) []*Node {
		n := Scalar(in[0].Graph(), in[0].DType(), 5)
		return []*Node{Add(DAPOMean(n)(in[0], in[2]), DAPOMean(n)(in[1], in[3]))}
	}, x[:1], x[1:], mask[:1], mask[1:])
	if !graphtest.Within(micro[0][0], full[0][0], 1e-15) {
		t.Errorf("Σ DAPO micro-batches = %v, want BNPO of the full batch %v", micro[0][0], full[0][0])
	}
}

// TRL's clip_ratio metrics and the mean k3 KL.
func TestGRPOLoss_Metrics(t *testing.T) {
	// ratios: row 0 = [0.7 (A<0: low), 1.0, masked 0.5]; row 1 = [1.3 (A>0: high), 0.9, 1.0]
	logps := [][]float64{{math.Log(0.7), 0, math.Log(0.5)}, {math.Log(1.3), math.Log(0.9), 0}}
	old := [][]float64{{0, 0, 0}, {0, 0, 0}}
	ref := [][]float64{{0, 0, 0}, {0.1, 0, -0.2}}
	mask := [][]float64{{1, 1, 0}, {1, 1, 1}}
	adv := []float64{-1, 1}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		_, m := Loss(Inputs{LogProbs: in[0], OldLogProbs: in[1], RefLogProbs: in[2], Mask: in[3], Advantages: in[4]},
			Params{EpsLow: 0.2, EpsHigh: 0.2, Beta: 0.1}, TokenRatio, GRPOMean)
		_, s := Loss(Inputs{LogProbs: in[0], OldLogProbs: in[1], Mask: in[3], Advantages: in[4]},
			Params{EpsLow: 0.01, EpsHigh: 0.01}, SequenceRatio, GRPOMean)
		return []*Node{m.ClipRatioLow, m.ClipRatioHigh, m.ClipRatioRegion, m.KL, s.ClipRatioLow, s.ClipRatioHigh, s.KL}
	}, logps, old, ref, mask, adv)
	k3 := func(lp, r float64) float64 { return math.Exp(r-lp) - (r - lp) - 1 }
	kl := (k3(math.Log(0.7), 0) + k3(0, 0) + k3(math.Log(1.3), 0.1) + k3(math.Log(0.9), 0) + k3(0, -0.2)) / 5
	// Sequence level: row 0 s = √0.7 < 0.99 with A < 0 → low; row 1 s = ∛1.17 > 1.01 with A > 0 → high.
	for i, want := range []float64{0.2, 0.2, 0.4, kl, 0.5, 0.5, 0} {
		if got := out[i][0]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("metric %d = %v, want %v", i, got, want)
		}
	}
}

// REINFORCE's weighting (식 (8.3)): at ρ = 1 each sequence's tokens get A_b/B.
func TestSequenceSumMean_ReinforceWeights(t *testing.T) {
	adv := []float64{0.5, -0.25, 0.75, -1}
	_, grad := ascent(t, groupLogps, groupLogps, groupLogps, groupMask, adv, Params{EpsLow: 0.2, EpsHigh: 0.2}, TokenRatio, SequenceSumMean)
	for i, a := range adv {
		for tok := 0; tok < 3; tok++ {
			want := a / 4
			if groupMask[i][tok] == 0 {
				want = 0
			}
			if got := grad[i*3+tok]; !graphtest.Within(got, want, 1e-15) {
				t.Errorf("sequence %d token %d: weight %v, want %v", i, tok, got, want)
			}
		}
	}
}

// GSPO-token has GSPO's value on every token but passes each token the full s (not s/|y|).
func TestSequenceTokenRatio_ValueAndGradient(t *testing.T) {
	logps := [][]float64{{0.10, -0.05, 0.02}, {0.3, 0, 0}}
	zeros := [][]float64{{0, 0, 0}, {0, 0, 0}}
	mask := [][]float64{{1, 1, 1}, {1, 0, 0}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		r := SequenceTokenRatio(in[0], in[1], in[2])
		return []*Node{r, Gradient(ReduceAllSum(tokenmask.Masked(r, in[2])), in[0])[0]}
	}, logps, zeros, mask)
	s0, s1 := math.Exp(0.07/3), math.Exp(0.3)
	for i, want := range []float64{s0, s0, s0, s1} {
		k := []int{0, 1, 2, 3}[i]
		if got := out[0][k]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("ratio[%d] = %v, want %v", k, got, want)
		}
		if got := out[1][k]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("∂ratio/∂log π[%d] = %v, want s = %v", k, got, want)
		}
	}
	if got := out[1][4]; got != 0 {
		t.Errorf("padding gradient = %v, want 0", got)
	}
}

// Finite differences of the whole loss off-policy with the KL term, for both ratio levels, at a
// point away from the clip boundaries.
func TestGRPOLoss_FiniteDifferences(t *testing.T) {
	logps := []float64{-0.4, -1.1, -0.2, -0.9, -0.5, -2.0}
	for _, ratio := range []Ratio{TokenRatio, SequenceRatio} {
		fn := func(in []*Node) []*Node {
			g := in[0].Graph()
			lp := Reshape(in[0], 2, 3)
			old := Const(g, [][]float64{{-0.35, -1.2, -0.25}, {-0.8, -0.45, 0}})
			ref := Const(g, [][]float64{{-0.5, -0.9, -0.3}, {-1.0, -0.6, 0}})
			mask := Const(g, [][]float64{{1, 1, 1}, {1, 1, 0}})
			adv := Const(g, []float64{0.8, -0.6})
			l, _ := Loss(Inputs{LogProbs: lp, OldLogProbs: old, RefLogProbs: ref, Mask: mask, Advantages: adv},
				Params{EpsLow: 0.2, EpsHigh: 0.28, Beta: 0.04}, ratio, GRPOMean)
			return []*Node{l, Gradient(l, in[0])[0]}
		}
		run := graphtest.Compile(t, fn)
		eval := func(x []float64) (float64, []float64) {
			outs := run(x)
			return outs[0][0], outs[1]
		}
		_, grad := eval(logps)
		const h = 1e-6
		for i := range logps {
			xp, xm := slices.Clone(logps), slices.Clone(logps)
			xp[i] += h
			xm[i] -= h
			lp, _ := eval(xp)
			lm, _ := eval(xm)
			if fd := (lp - lm) / (2 * h); !graphtest.Within(grad[i], fd, 1e-8) {
				t.Errorf("token %d: autodiff %v, finite difference %v", i, grad[i], fd)
			}
		}
	}
}

// Params.Delta selects the two-sided surrogate (rl.TwoSidedClippedSurrogate, checked by hand
// there; ε = 0.2, δ = 2), and the clip metrics see the capped ratio.
func TestLoss_DeltaSelectsTwoSided(t *testing.T) {
	adv := [][]float64{{1, -1, -1, -1, 1}}
	// GRPOMean of one row of 5 tokens.
	logps := [][]float64{{math.Log(3), math.Log(3), math.Log(1.5), math.Log(0.5), math.Log(0.5)}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		inputs := Inputs{LogProbs: in[0], OldLogProbs: ZerosLike(in[0]), Mask: OnesLike(in[0]), Advantages: in[1]}
		l, m := Loss(inputs, Params{EpsLow: 0.2, EpsHigh: 0.2, Delta: 2}, TokenRatio, GRPOMean)
		return []*Node{l, m.ClipRatioHigh, m.ClipRatioLow}
	}, logps, adv)
	if got, want := out[0][0], (-1.2+2+1.5+0.8-0.5)/5; !graphtest.Within(got, want, 1e-12) {
		t.Errorf("Loss with δ = 2: %v, want %v", got, want)
	}
	// The clip metrics see the capped ratio (TRL reassigns coef_1): ρ = 3 → 2 is still > 1.2.
	if got := out[1][0]; !graphtest.Within(got, 0.2, 1e-15) {
		t.Errorf("clip_ratio/high_mean = %v, want 0.2 (ρ = 3, A > 0)", got)
	}
	if got := out[2][0]; !graphtest.Within(got, 0.2, 1e-15) {
		t.Errorf("clip_ratio/low_mean = %v, want 0.2 (ρ = 0.5, A < 0)", got)
	}
}
