package dpo

import (
	"math"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// TinyLM at its SFT start (phase 10): π = π_ref, log-probs of '12⏎' = log(0.4·0.5·0.8) and of
// '7⏎' = log(0.4·0.8), padded to T = 3 with a masked third token.
var (
	chosen12   = []float64{math.Log(0.4), math.Log(0.5), math.Log(0.8)}
	rejected7  = []float64{math.Log(0.4), math.Log(0.8), math.Inf(-1)} // padding may hold −∞
	maskFull   = []float64{1, 1, 1}
	maskTwoTok = []float64{1, 1, 0}
)

// sigmoidGraph returns the loss, −∂L/∂(chosen token log-probs) and ∂L/∂(rejected token log-probs).
func sigmoidGraph(beta, ls float64) func(in []*Node) []*Node {
	return func(in []*Node) []*Node {
		pc, pr := SeqLogProbs(in[0], in[2]), SeqLogProbs(in[1], in[3])
		rc, rr := SeqLogProbs(in[4], in[2]), SeqLogProbs(in[5], in[3])
		loss, m := SigmoidLoss(pc, pr, rc, rr, beta, ls)
		grads := Gradient(loss, in[0], in[1])
		out := []*Node{loss, Neg(grads[0]), grads[1]}
		return append(out, m.Means()...)
	}
}

// Phase 10 hand_check: "처음: m = 0, DPO loss = log 2 = 0.6931, gradient 계수 β·σ(0) = 0.05".
func TestDPOLoss_InitIsLn2(t *testing.T) {
	out := graphtest.Eval(t, sigmoidGraph(0.1, 0),
		[][]float64{chosen12}, [][]float64{rejected7}, [][]float64{maskFull}, [][]float64{maskTwoTok},
		[][]float64{chosen12}, [][]float64{rejected7})
	if got, want := out[0][0], math.Log(2); !graphtest.Within(got, want, 1e-12) {
		t.Errorf("loss = %v, want ln 2 = %v", got, want)
	}
	// Every token of y_w gets +β·σ(0) = 0.05 (ascent), every token of y_l −0.05, padding 0.
	for i, got := range out[1] {
		if !graphtest.Within(got, 0.05, 1e-12) {
			t.Errorf("chosen token %d: coefficient %v, want 0.05", i, got)
		}
	}
	for i, want := range []float64{0.05, 0.05, 0} {
		if got := out[2][i]; !graphtest.Within(got, want, 1e-12) {
			t.Errorf("rejected token %d: ∂L/∂logp = %v, want %v", i, got, want)
		}
	}
	for i, name := range MetricNames[:4] {
		if got := out[3+i][0]; got != 0 {
			t.Errorf("%s = %v, want 0 at the start", name, got)
		}
	}
	for i, want := range []float64{math.Log(0.16), math.Log(0.32)} {
		if got := out[7+i][0]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("%s = %v, want %v", MetricNames[4+i], got, want)
		}
	}
}

// −∂L/∂m = β·σ(−β·m) (식 (10.3)'s coefficient) for m ≠ 0, and the metrics are β·log π/π_ref.
func TestDPOLoss_GradientIsCourseCoefficient(t *testing.T) {
	const beta = 0.1
	pc := []float64{-1.2, -0.3, -4.0}
	pr := []float64{-2.5, -0.9, -0.1}
	rc := []float64{-1.5, -0.3, -3.0}
	rr := []float64{-2.0, -1.4, -0.2}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		loss, m := SigmoidLoss(in[0], in[1], in[2], in[3], beta, 0)
		g := Gradient(loss, in[0], in[1], in[2])
		return append([]*Node{loss, g[0], g[1], g[2], m.RewardsChosen, m.Accuracies, m.Margins}, m.Means()...)
	}, pc, pr, rc, rr)
	var wantLoss float64
	for i := range pc {
		m := (pc[i] - rc[i]) - (pr[i] - rr[i])
		wantLoss += -math.Log(sigmoid(beta*m)) / 3
		coef := beta * sigmoid(-beta*m) / 3 // mean over 3 pairs
		if got := -out[1][i]; !graphtest.Within(got, coef, 1e-14) {
			t.Errorf("pair %d: −∂L/∂log π(y_w) = %v, want β·σ(−βm)/B = %v", i, got, coef)
		}
		if got := out[2][i]; !graphtest.Within(got, coef, 1e-14) {
			t.Errorf("pair %d: ∂L/∂log π(y_l) = %v, want %v", i, got, coef)
		}
		if got := out[3][i]; got != 0 {
			t.Errorf("pair %d: reference log-probs got gradient %v, want 0 (detached)", i, got)
		}
		if got, want := out[4][i], beta*(pc[i]-rc[i]); !graphtest.Within(got, want, 1e-15) {
			t.Errorf("pair %d: rewards/chosen = %v, want %v", i, got, want)
		}
		wantAcc := 0.0
		if beta*(pc[i]-rc[i]) > beta*(pr[i]-rr[i]) {
			wantAcc = 1
		}
		if got := out[5][i]; got != wantAcc {
			t.Errorf("pair %d: accuracy = %v, want %v", i, got, wantAcc)
		}
		if got, want := out[6][i], beta*m; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("pair %d: margin = %v, want %v", i, got, want)
		}
	}
	if got := out[0][0]; !graphtest.Within(got, wantLoss, 1e-14) {
		t.Errorf("loss = %v, want %v", got, wantLoss)
	}
}

// TRL's cDPO: −(1−ε)·log σ(βm) − ε·log σ(−βm); at ε = ½ the gradient at m = 0 vanishes.
func TestDPOLoss_LabelSmoothing(t *testing.T) {
	const beta, ls = 0.5, 0.2
	for _, m := range []float64{0, 1.3, -2.1} {
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			loss, _ := SigmoidLoss(in[0], in[1], in[2], in[3], beta, ls)
			return []*Node{loss, Gradient(loss, in[0])[0]}
		}, []float64{m}, []float64{0}, []float64{0}, []float64{0})
		want := -(1-ls)*math.Log(sigmoid(beta*m)) - ls*math.Log(sigmoid(-beta*m))
		if got := out[0][0]; !graphtest.Within(got, want, 1e-14) {
			t.Errorf("m=%v: loss = %v, want %v", m, got, want)
		}
		wantGrad := -(1-ls)*beta*sigmoid(-beta*m) + ls*beta*sigmoid(beta*m)
		if got := out[1][0]; !graphtest.Within(got, wantGrad, 1e-14) {
			t.Errorf("m=%v: ∂L/∂m = %v, want %v", m, got, wantGrad)
		}
	}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		loss, _ := SigmoidLoss(in[0], in[1], in[2], in[3], 0.1, 0.5)
		return []*Node{Gradient(loss, in[0])[0]}
	}, []float64{0}, []float64{0}, []float64{0}, []float64{0})
	if got := out[0][0]; got != 0 {
		t.Errorf("ε=0.5, m=0: gradient %v, want 0", got)
	}
}

// IPO: (m − 1/(2β))² on length-normalised log-probs (TRL loss_type "ipo").
func TestIPOLoss_LengthNormalisedTarget(t *testing.T) {
	const beta = 0.1
	pol := [][]float64{{-0.5, -1.0, -0.3}, {-0.2, -0.4, 0}}
	ref := [][]float64{{-0.6, -1.0, -0.5}, {-0.2, -0.1, 0}}
	mask := [][]float64{{1, 1, 1}, {1, 1, 0}}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		p, r := MeanLogProbs(in[0], in[2]), MeanLogProbs(in[1], in[2])
		// pair 0: chosen = row 0, rejected = row 1
		pc, pr := Slice(p, AxisRange(0, 1)), Slice(p, AxisRange(1, 2))
		rc, rr := Slice(r, AxisRange(0, 1)), Slice(r, AxisRange(1, 2))
		loss, _ := IPOLoss(pc, pr, rc, rr, beta)
		return []*Node{loss, p}
	}, pol, ref, mask)
	meanC := (-0.5 - 1.0 - 0.3) / 3
	meanR := (-0.2 - 0.4) / 2
	if got := out[1]; !graphtest.Within(got[0], meanC, 1e-15) || !graphtest.Within(got[1], meanR, 1e-15) {
		t.Fatalf("MeanLogProbs = %v, want [%v %v]", got, meanC, meanR)
	}
	m := (meanC - (-0.6-1.0-0.5)/3) - (meanR - (-0.2-0.1)/2)
	want := (m - 1/(2*beta)) * (m - 1/(2*beta))
	if got := out[0][0]; !graphtest.Within(got, want, 1e-12) {
		t.Errorf("IPO loss = %v, want (m − 1/(2β))² = %v", got, want)
	}
}

// Finite differences of the whole pipeline (token log-probs → loss), label smoothing on.
func TestDPOLoss_FiniteDifferences(t *testing.T) {
	pc := []float64{-0.7, -1.1, -0.2}
	fn := func(in []*Node) []*Node {
		mask := Const(in[0].Graph(), [][]float64{{1, 1, 1}})
		p := SeqLogProbs(in[0], mask)
		loss, _ := SigmoidLoss(p, Const(p.Graph(), []float64{-2.0}), Const(p.Graph(), []float64{-1.5}),
			Const(p.Graph(), []float64{-2.2}), 0.3, 0.1)
		return []*Node{loss, Gradient(loss, in[0])[0]}
	}
	run := graphtest.Compile(t, fn)
	eval := func(x []float64) []float64 {
		outs := run([][]float64{x})
		return append(outs[0], outs[1]...)
	}
	base := eval(pc)
	const h = 1e-6
	for i := range pc {
		xp, xm := append([]float64(nil), pc...), append([]float64(nil), pc...)
		xp[i] += h
		xm[i] -= h
		fd := (eval(xp)[0] - eval(xm)[0]) / (2 * h)
		if got := base[1+i]; !graphtest.Within(got, fd, 1e-8) {
			t.Errorf("token %d: autodiff %v, finite difference %v", i, got, fd)
		}
	}
}

// TRL's hinge: L = relu(1 − β·m); inside the margin ∂L/∂m = −β, past it (β·m ≥ 1) no gradient.
func TestHingeLoss_MarginAndGradient(t *testing.T) {
	const beta = 0.5
	for _, c := range []struct{ m, wantLoss, wantGrad float64 }{
		{0, 1, -beta}, {1.2, 0.4, -beta}, {-2, 2, -beta}, {3, 0, 0},
	} {
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			loss, _ := HingeLoss(in[0], in[1], in[2], in[3], beta)
			return []*Node{loss, Gradient(loss, in[0])[0]}
		}, []float64{c.m}, []float64{0}, []float64{0}, []float64{0})
		if got := out[0][0]; !graphtest.Within(got, c.wantLoss, 1e-15) {
			t.Errorf("m=%v: loss = %v, want %v", c.m, got, c.wantLoss)
		}
		if got := out[1][0]; !graphtest.Within(got, c.wantGrad, 1e-15) {
			t.Errorf("m=%v: ∂L/∂m = %v, want %v", c.m, got, c.wantGrad)
		}
	}
}

// RPO's NLL is one per-token mean over all the chosen tokens of the batch (not a mean of
// per-sequence means), without the tokens whose id is 0 (TRL's ignore_index=0); its gradient is
// −m/N per token, and WithNLL adds α·NLL to the loss.
func TestNLL_PerTokenMeanOverTheChosenBatch(t *testing.T) {
	logps := [][]float64{{0, -1.0, -2.0, -0.4}, {0, -0.1, -0.3, 0}}
	scored := [][]float64{{0, 1, 1, 1}, {0, 1, 0, 0}}
	ids := [][]int32{{5, 7, 0, 9}, {4, 3, 8, 0}} // row 0's third token is id 0: TRL ignores it
	const alpha, dpoLoss = 0.5, 0.7
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		nll := NLL(in[0], NLLMask(in[2], in[1]))
		total := WithNLL(Scalar(nll.Graph(), nll.DType(), dpoLoss), nll, alpha)
		return []*Node{nll, Gradient(nll, in[0])[0], total, NLL(in[0], in[1])}
	}, logps, scored, ids)
	// (1.0 + 0.4 + 0.1) / 3 tokens; the mean of per-row means would be (0.7 + 0.1)/2 = 0.4.
	if got, want := out[0][0], (1.0+0.4+0.1)/3; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("NLL = %v, want %v", got, want)
	}
	wantGrad := []float64{0, -1.0 / 3, 0, -1.0 / 3, 0, -1.0 / 3, 0, 0}
	for i, w := range wantGrad {
		if got := out[1][i]; !graphtest.Within(got, w, 1e-15) {
			t.Errorf("∂NLL/∂logp[%d] = %v, want %v", i, got, w)
		}
	}
	if got, want := out[2][0], dpoLoss+alpha*0.5; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("WithNLL = %v, want L + α·NLL = %v", got, want)
	}
	if got, want := out[3][0], (1.0+2.0+0.4+0.1)/4; !graphtest.Within(got, want, 1e-15) {
		t.Errorf("NLL over the plain completion mask = %v, want %v", got, want)
	}
}

// logits/chosen is TRL's logits[loss_mask].mean(): the mean over the completion tokens' scoring
// logits and the whole vocabulary. Here the logits are written out; MeanLogits gets their sums
// over the vocabulary at the positions that score each token (decoder.TargetLogitSums' layout).
func TestMeanLogits_MeanOverTokensAndVocabulary(t *testing.T) {
	z := [][][]float64{ // [B=2,T=4,V=3]
		{{0.5, -1, 2}, {3, 0, -0.5}, {1, 1, 1}, {9, 9, 9}},
		{{-2, 0, 0.25}, {4, -3, 1}, {0, 0.5, 2}, {7, 7, 7}},
	}
	scored := [][]float64{{0, 1, 1, 0}, {0, 0, 1, 1}}
	sums := make([][]float64, 2)
	want, n := 0.0, 0.0
	for b := range z {
		sums[b] = make([]float64, 4)
		for t := 1; t < 4; t++ {
			for _, v := range z[b][t-1] {
				sums[b][t] += v
				if scored[b][t] == 1 {
					want += v
					n++
				}
			}
		}
	}
	want /= n // n = 4 tokens × 3 entries
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		return []*Node{MeanLogits(in[0], in[1], 3)}
	}, sums, scored)
	if got := out[0][0]; !graphtest.Within(got, want, 1e-15) || n != 12 {
		t.Errorf("MeanLogits = %v over %v entries, want %v over 12", got, n, want)
	}
	if !graphtest.Within(want, (0.5-1+2+3+0-0.5+4-3+1+0+0.5+2)/12, 1e-15) {
		t.Errorf("hand check: %v", want)
	}
}

// onePair evaluates a loss type on pairs given as policy log-ratios (the reference log-probs are
// rc, rr), returning the loss and ∂L/∂(policy chosen), ∂L/∂(policy rejected), ∂L/∂(ref chosen).
func onePair(t *testing.T, f func(pc, pr, rc, rr *Node) (*Node, Metrics), pc, pr, rc, rr []float64) (loss float64, dpc, dpr, drc []float64) {
	t.Helper()
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		l, _ := f(in[0], in[1], in[2], in[3])
		g := Gradient(l, in[0], in[1], in[2])
		return []*Node{l, g[0], g[1], g[2]}
	}, pc, pr, rc, rr)
	return out[0][0], out[1], out[2], out[3]
}

// Hand checks of TRL's other loss types (dpo_trainer.py dpo_loss, v0.24), one pair unless said,
// at points where σ is simple: σ(ln 3) = 3/4, σ(−ln 3) = 1/4, σ(0) = 1/2.
func TestLossTypes_HandChecks(t *testing.T) {
	ln3, ln2 := math.Log(3), math.Log(2)
	cases := []struct {
		name           string
		f              func(pc, pr, rc, rr *Node) (*Node, Metrics)
		pc, pr, rc, rr float64
		loss, dpc, dpr float64
	}{
		// robust, β=1, ε=¼, m=ln 3: [¾·ln(4/3) − ¼·ln 4]/½ = 2ln2 − (3/2)ln3 < 0;
		// ∂L/∂m = [−(1−ε)σ(−m) − εσ(m)]/(1−2ε) = −(3/16 + 3/16)/½ = −¾.
		{"robust", func(a, b, c, d *Node) (*Node, Metrics) { return RobustLoss(a, b, c, d, 1, 0.25) },
			ln3, 0, 0, 0, 2*ln2 - 1.5*ln3, -0.75, 0.75},
		// robust at ε=0 is the sigmoid loss: ln 2 at m=0, ∂L/∂m = −½.
		{"robust ε=0", func(a, b, c, d *Node) (*Node, Metrics) { return RobustLoss(a, b, c, d, 1, 0) },
			0, 0, 0, 0, ln2, -0.5, 0.5},
		// exo_pair, β=1, ε=¼, m=0: ½(ln½ − ln¾) + ½(ln½ − ln¼) = ½ln(4/3);
		// ∂L/∂z = σ(z)σ(−z)·(z − ln((1−ε)/ε)) = ¼·(0 − ln3).
		{"exo_pair", func(a, b, c, d *Node) (*Node, Metrics) { return ExoPairLoss(a, b, c, d, 1, 0.25) },
			0, 0, 0, 0, 0.5 * math.Log(4.0/3), -ln3 / 4, ln3 / 4},
		// exo_pair at σ(βm) = 1−ε (m = ln 3, ε = ¼): the KL is 0, and so is its gradient.
		{"exo_pair minimum", func(a, b, c, d *Node) (*Node, Metrics) { return ExoPairLoss(a, b, c, d, 1, 0.25) },
			ln3, 0, 0, 0, 0, 0, 0},
		// nca_pair, β=1, c=ln3, r=−ln3: ln(4/3) + ½ln4 + ½ln(4/3);
		// ∂/∂c = −σ(−c) + ½σ(c) = −¼ + 3/8 = 1/8, ∂/∂r = ½σ(r) = 1/8.
		{"nca_pair", func(a, b, c, d *Node) (*Node, Metrics) { return NCAPairLoss(a, b, c, d, 1) },
			ln3, -ln3, 0, 0, 1.5*math.Log(4.0/3) + ln2, 0.125, 0.125},
		// sppo_hard, β=½ (1/(2β) = 1), c = 3.5−0.5 = 3, r = −1+0.5 = −½: (3−1)² + (−½+1)² = 4.25;
		// ∂/∂c = 2(c−1) = 4, ∂/∂r = 2(r+1) = 1.
		{"sppo_hard", func(a, b, c, d *Node) (*Node, Metrics) { return SPPOHardLoss(a, b, c, d, 0.5) },
			3.5, -1, 0.5, -0.5, 4.25, 4, 1},
		// discopop, β=1, τ=0.05, m=0: w = ½, L = ½ln2 + ½·1;
		// ∂L/∂z = w'(e^{−z} − s) + (1−w)s' − w·e^{−z} with w' = σ(0)²/τ = 5, s = ln2, s' = −½:
		// 5(1 − ln2) − ¼ − ½ (positive: DiscoPOP is not monotone near 0).
		{"discopop", func(a, b, c, d *Node) (*Node, Metrics) { return DiscoPOPLoss(a, b, c, d, 1, 0.05) },
			0, 0, 0, 0, 0.5*ln2 + 0.5, 5*(1-ln2) - 0.75, -(5*(1-ln2) - 0.75)},
		// apo_zero, β=1, c=ln3, r=−ln3: (1 − ¾) + ¼ = ½; ∂/∂c = −σ'(c) = −3/16, ∂/∂r = σ'(r) = 3/16.
		{"apo_zero", func(a, b, c, d *Node) (*Node, Metrics) { return APOZeroLoss(a, b, c, d, 1) },
			ln3, -ln3, 0, 0, 0.5, -3.0 / 16, 3.0 / 16},
		// apo_down, β=1, c=0, r=−ln3: σ(0) + (1 − σ(ln3)) = ¾;
		// ∂/∂c = σ'(0) − σ'(c−r) = ¼ − 3/16, ∂/∂r = σ'(c−r) = 3/16.
		{"apo_down", func(a, b, c, d *Node) (*Node, Metrics) { return APODownLoss(a, b, c, d, 1) },
			0, -ln3, 0, 0, 0.75, 1.0 / 16, 3.0 / 16},
	}
	for _, c := range cases {
		loss, dpc, dpr, drc := onePair(t, c.f, []float64{c.pc}, []float64{c.pr}, []float64{c.rc}, []float64{c.rr})
		if !graphtest.Within(loss, c.loss, 1e-14) {
			t.Errorf("%s: loss = %.15g, want %.15g", c.name, loss, c.loss)
		}
		if !graphtest.Within(dpc[0], c.dpc, 1e-14) || !graphtest.Within(dpr[0], c.dpr, 1e-14) {
			t.Errorf("%s: ∂L/∂(chosen, rejected) = %.15g, %.15g, want %.15g, %.15g", c.name, dpc[0], dpr[0], c.dpc, c.dpr)
		}
		if drc[0] != 0 {
			t.Errorf("%s: the reference got gradient %v, want 0 (detached)", c.name, drc[0])
		}
	}
}

// AOT sorts over the micro-batch: policy margins [2, −1, 0.5] against reference margins
// [0, 1, −1] pair up as sorted [−1, 0.5, 2] − [−1, 0, 1] = δ [0, ½, 1], so
// L = (ln2 + softplus(−½) + softplus(−1))/3, and each pair's gradient is −σ(−δ_k)/3 at its rank k.
func TestAOTLoss_SortedMargins(t *testing.T) {
	softplus := func(x float64) float64 { return math.Log1p(math.Exp(x)) }
	loss, dpc, dpr, drc := onePair(t, func(a, b, c, d *Node) (*Node, Metrics) { return AOTLoss(a, b, c, d, 1, 0) },
		[]float64{2, -1, 0.5}, []float64{0, 0, 0}, []float64{0, 1, -1}, []float64{0, 0, 0})
	if want := (math.Ln2 + softplus(-0.5) + softplus(-1)) / 3; !graphtest.Within(loss, want, 1e-14) {
		t.Errorf("aot loss = %.15g, want %.15g", loss, want)
	}
	for i, want := range []float64{-sigmoid(-1) / 3, -sigmoid(0) / 3, -sigmoid(-0.5) / 3} {
		if !graphtest.Within(dpc[i], want, 1e-14) || !graphtest.Within(dpr[i], -want, 1e-14) || drc[i] != 0 {
			t.Errorf("aot pair %d: gradients %v, %v, ref %v; want %v, %v, 0", i, dpc[i], dpr[i], drc[i], want, -want)
		}
	}
	// aot_pair sorts c and r apart: c = [1, −1], r = [−2, 0] → δ = [−1,1] − [−2,0] = [1, 1]
	// (unsorted it would be [3, −1]); with ε = 0.1: 0.9·softplus(−1) + 0.1·softplus(1) = softplus(−1) + 0.1.
	loss, _, _, _ = onePair(t, func(a, b, c, d *Node) (*Node, Metrics) { return AOTPairLoss(a, b, c, d, 1, 0.1) },
		[]float64{1.5, -1}, []float64{-1, 1}, []float64{0.5, 0}, []float64{1, 1})
	if want := softplus(-1) + 0.1; !graphtest.Within(loss, want, 1e-14) {
		t.Errorf("aot_pair loss = %.15g, want %.15g", loss, want)
	}
}

// sortAscending is torch.sort's values, ties included, and routes each sorted entry's gradient
// to the element it came from.
func TestSortAscending_ValuesAndGradient(t *testing.T) {
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		s := sortAscending(in[0])
		w := Const(s.Graph(), []float64{1, 10, 100, 1000})
		return []*Node{s, Gradient(ReduceAllSum(Mul(s, w)), in[0])[0]}
	}, []float64{1, -2, 1, 0})
	for i, want := range []float64{-2, 0, 1, 1} {
		if out[0][i] != want {
			t.Errorf("sorted = %v, want [-2 0 1 1]", out[0])
			break
		}
	}
	for i, want := range []float64{100, 1, 1000, 10} { // ties keep their order, as a stable sort
		if out[1][i] != want {
			t.Errorf("gradient = %v, want [100 1 1000 10]", out[1])
			break
		}
	}
}

// TRL get_batch_loss_metrics: losses and rewards are summed with the weights, so with weights
// [2, ½] the logged rewards are 2.5 × β·log-ratio; sft adds w·NLL; one type with weight 1 is that
// type's own loss, bit for bit.
func TestCombine_WeightedSumAsTRL(t *testing.T) {
	const beta, nll = 0.5, 1.3
	pc, pr, rc, rr := []float64{0.4}, []float64{-0.2}, []float64{0}, []float64{0}
	eval := func(types []string, weights []float64) [][]float64 {
		return graphtest.Eval(t, func(in []*Node) []*Node {
			p := Pairs{in[0], in[1], in[2], in[3], Scalar(in[0].Graph(), in[0].DType(), nll)}
			loss, m := Combine(types, weights, p, Params{Beta: beta, DiscopopTau: 0.05})
			single, _ := SigmoidLoss(in[0], in[1], in[2], in[3], beta, 0)
			return append([]*Node{loss, Sub(loss, single)}, m.Means()...)
		}, pc, pr, rc, rr)
	}
	out := eval([]string{"sigmoid", "sft"}, []float64{2, 0.5})
	if want := 2*math.Log1p(math.Exp(-beta*0.6)) + 0.5*nll; !graphtest.Within(out[0][0], want, 1e-14) {
		t.Errorf("loss = %.15g, want 2·softplus(−0.3) + ½·1.3 = %.15g", out[0][0], want)
	}
	for i, want := range []float64{2.5 * beta * 0.4, 2.5 * beta * -0.2, 1, 2.5 * beta * 0.6, 0.4, -0.2} {
		if !graphtest.Within(out[2+i][0], want, 1e-15) {
			t.Errorf("%s = %v, want %v", MetricNames[i], out[2+i][0], want)
		}
	}
	if out := eval([]string{"sigmoid"}, nil); out[1][0] != 0 || out[2][0] != beta*0.4 {
		t.Errorf("one type: loss differs from SigmoidLoss by %v, rewards/chosen %v", out[1][0], out[2][0])
	}
	// Σw < 0 flips TRL's accuracies (chosen_rewards > rejected_rewards on the weighted sums).
	if out := eval([]string{"sigmoid", "hinge"}, []float64{1, -2}); out[4][0] != 0 || !graphtest.Within(out[5][0], -beta*0.6, 1e-15) {
		t.Errorf("weights [1, −2]: accuracies %v, margins %v; want 0, %v", out[4][0], out[5][0], -beta*0.6)
	}
}

// The trainer-level rules of TRL's multi-loss DPO.
func TestLossTypeRules(t *testing.T) {
	if !LengthNormalised([]string{"sigmoid", "ipo"}) || LengthNormalised([]string{"sigmoid", "sft"}) {
		t.Error(`LengthNormalised: TRL normalises every type's log-probs when "ipo" is in the list, only then`)
	}
	if !NeedsNLL([]string{"sigmoid", "sft"}, 0) || !NeedsNLL([]string{"hinge"}, 0.5) || NeedsNLL([]string{"hinge"}, 0) {
		t.Error("NeedsNLL: nll_loss with sft or rpo_alpha, only then")
	}
	if ExoLabelSmoothing([]string{"exo_pair"}, 0) != 1e-3 || ExoLabelSmoothing([]string{"exo_pair"}, 0.2) != 0.2 ||
		ExoLabelSmoothing([]string{"sigmoid"}, 0) != 0 {
		t.Error("ExoLabelSmoothing: 1e-3 replaces 0 when exo_pair is listed, only then")
	}
	if err := CheckLossTypes([]string{"sigmoid", "bco_pair"}); err == nil || !strings.Contains(err.Error(), `"bco_pair"`) {
		t.Errorf("CheckLossTypes(bco_pair) = %v", err)
	}
	if err := CheckLossTypes([]string{"sigmoid", "ipo", "hinge", "robust", "exo_pair", "nca_pair", "sppo_hard", "aot", "aot_pair", "discopop", "apo_zero", "apo_down", "sft"}); err != nil {
		t.Error(err)
	}
}
