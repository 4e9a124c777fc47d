package dpo

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/internal/graphtest"
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
// over the vocabulary at the positions that score each token (qwen2.TargetLogitSums' layout).
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
