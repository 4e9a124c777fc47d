package kto

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/graphtest"
)

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// Phase 10's train_kto at its first epoch: π = π_ref so r = 0 and z = max(0, KL) = 0; every loss is
// 1 − σ(0) = ½ and the course's coefficient −∂L/∂r = ±β·v(1−v) = ±0.1·¼, divided by len(labels).
func TestKTOLoss_InitCoefficient(t *testing.T) {
	cfg := LossConfig{Beta: 0.1, DesirableWeight: 1, UndesirableWeight: 1}
	logps := []float64{math.Log(0.16), math.Log(0.32), math.Log(0.04), math.Log(0.24), math.Log(0.3), math.Log(0.2)}
	desirable := []bool{true, false, false, true, false, false} // KTO_LABELS
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		loss, _ := Loss(in[0], in[1], in[2], in[3], cfg)
		return []*Node{loss, Neg(Gradient(loss, in[0])[0])}
	}, logps, logps, desirable, 0.0)
	if got := out[0][0]; !graphtest.Within(got, 0.5, 1e-15) {
		t.Errorf("loss = %v, want 1 − σ(0) = 0.5", got)
	}
	for i, good := range desirable {
		want := 0.1 * 0.5 * 0.5 / 6
		if !good {
			want = -want
		}
		if got := out[1][i]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("example %d: −∂L/∂log π = %v, want ±β·v(1−v)/6 = %v", i, got, want)
		}
	}
}

// 식 (10.4) off the start: the value, the course's coefficient w·β·v(1−v)·(±1)/B, the clamp of a
// negative z at 0, no gradient to z or π_ref, and TRL's metrics.
func TestKTOLoss_CoefficientAndReferencePoint(t *testing.T) {
	cfg := LossConfig{Beta: 0.5, DesirableWeight: 1.5, UndesirableWeight: 0.75}
	pol := []float64{-0.4, -2.0, -1.1, -0.2}
	ref := []float64{-0.9, -1.5, -1.0, -0.6}
	desirable := []float64{1, 0, 1, 0}
	for _, zIn := range []float64{0.3, -0.7} {
		z := math.Max(0, zIn)
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			loss, m := Loss(in[0], in[1], in[2], in[3], cfg)
			g := Gradient(loss, in[0], in[1], in[3])
			return []*Node{loss, Neg(g[0]), g[1], g[2], m.RewardsChosenSum, m.RewardsRejectedSum,
				m.CountChosen, m.CountRejected, m.KL}
		}, pol, ref, desirable, zIn)
		var wantLoss, chosenSum, rejectedSum float64
		for i := range pol {
			r := pol[i] - ref[i]
			good := desirable[i] == 1
			var v, w, sign float64
			if good {
				v, w, sign = sigmoid(cfg.Beta*(r-z)), cfg.DesirableWeight, 1
				chosenSum += cfg.Beta * r
			} else {
				v, w, sign = sigmoid(cfg.Beta*(z-r)), cfg.UndesirableWeight, -1
				rejectedSum += cfg.Beta * r
			}
			wantLoss += w * (1 - v) / 4
			coef := w * cfg.Beta * v * (1 - v) * sign / 4
			if got := out[1][i]; !graphtest.Within(got, coef, 1e-15) {
				t.Errorf("z=%v example %d: −∂L/∂log π = %v, want %v", zIn, i, got, coef)
			}
			if got := out[2][i]; got != 0 {
				t.Errorf("z=%v example %d: π_ref got gradient %v, want 0", zIn, i, got)
			}
		}
		if got := out[0][0]; !graphtest.Within(got, wantLoss, 1e-15) {
			t.Errorf("z=%v: loss = %v, want %v", zIn, got, wantLoss)
		}
		if got := out[3][0]; got != 0 {
			t.Errorf("z=%v: z got gradient %v, want 0 (detached)", zIn, got)
		}
		for i, want := range []float64{chosenSum, rejectedSum, 2, 2, z} {
			if got := out[4+i][0]; !graphtest.Within(got, want, 1e-15) {
				t.Errorf("z=%v: metric %d = %v, want %v", zIn, i, got, want)
			}
		}
	}
}

// z from the KL completions: max(0, mean(π − π_ref)), detached.
func TestKTOReferencePoint_ClampedMean(t *testing.T) {
	for _, c := range []struct {
		pol, ref []float64
		want     float64
	}{
		{[]float64{-1, -2}, []float64{-1.5, -2.1}, 0.3},
		{[]float64{-1, -2}, []float64{-0.5, -2.1}, 0},
	} {
		out := graphtest.Eval(t, func(in []*Node) []*Node {
			z := ReferencePoint(in[0], in[1])
			return []*Node{z, Gradient(ReduceAllSum(Mul(z, in[0])), in[0])[0]}
		}, c.pol, c.ref)
		if got := out[0][0]; !graphtest.Within(got, c.want, 1e-15) {
			t.Errorf("ReferencePoint(%v, %v) = %v, want %v", c.pol, c.ref, got, c.want)
		}
		// ∂(Σ z·π)/∂π = z alone when z is detached.
		for i, gr := range out[1] {
			if !graphtest.Within(gr, c.want, 1e-15) {
				t.Errorf("∂(Σ z·π)/∂π[%d] = %v, want z = %v (no gradient through z)", i, gr, c.want)
			}
		}
	}
}

// APO-zero unpaired (TRL loss_type "apo_zero_unpaired"): desirable w_D·(1 − σ(βr)), undesirable
// w_U·σ(βr), anchored at r = 0; −∂L/∂log π = ±w·β·v(1−v)/B with v = σ(βr); no gradient to π_ref;
// kl = 0; the same reward sums and counts as KTO.
func TestAPOZeroUnpairedLoss_HandCheck(t *testing.T) {
	cfg := LossConfig{Beta: 0.5, DesirableWeight: 1.5, UndesirableWeight: 0.75}
	pol := []float64{-0.4, -2.0, -1.1, -0.2}
	ref := []float64{-0.9, -1.5, -1.0, -0.6}
	desirable := []bool{true, false, true, false}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		loss, m := APOZeroUnpairedLoss(in[0], in[1], in[2], cfg)
		g := Gradient(loss, in[0], in[1])
		return []*Node{loss, Neg(g[0]), g[1], m.RewardsChosenSum, m.RewardsRejectedSum, m.CountChosen, m.CountRejected, m.KL}
	}, pol, ref, desirable)
	// r = [0.5, −0.5, −0.1, 0.4]; βr = [0.25, −0.25, −0.05, 0.2]
	wantLoss := (1.5*(1-sigmoid(0.25)) + 0.75*sigmoid(-0.25) + 1.5*(1-sigmoid(-0.05)) + 0.75*sigmoid(0.2)) / 4
	if got := out[0][0]; !graphtest.Within(got, wantLoss, 1e-15) {
		t.Errorf("loss = %v, want %v", got, wantLoss)
	}
	for i, br := range []float64{0.25, -0.25, -0.05, 0.2} {
		v := sigmoid(br)
		w, sign := cfg.DesirableWeight, 1.0
		if !desirable[i] {
			w, sign = cfg.UndesirableWeight, -1
		}
		if got, want := out[1][i], sign*w*cfg.Beta*v*(1-v)/4; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("example %d: −∂L/∂log π = %v, want %v", i, got, want)
		}
		if got := out[2][i]; got != 0 {
			t.Errorf("example %d: π_ref got gradient %v, want 0", i, got)
		}
	}
	for i, want := range []float64{0.25 - 0.05, -0.25 + 0.2, 2, 2, 0} {
		if got := out[3+i][0]; !graphtest.Within(got, want, 1e-15) {
			t.Errorf("metric %d = %v, want %v", i, got, want)
		}
	}
}

// At the start (π = π_ref) every example's APO-zero loss is ½, as KTO's with z = 0.
func TestAPOZeroUnpairedLoss_InitIsHalf(t *testing.T) {
	cfg := LossConfig{Beta: 0.1, DesirableWeight: 1, UndesirableWeight: 1}
	logps := []float64{-1.2, -0.3, -2.5}
	out := graphtest.Eval(t, func(in []*Node) []*Node {
		loss, _ := APOZeroUnpairedLoss(in[0], in[1], in[2], cfg)
		return []*Node{loss}
	}, logps, logps, []bool{true, false, false})
	if got := out[0][0]; !graphtest.Within(got, 0.5, 1e-15) {
		t.Errorf("loss = %v, want 0.5", got)
	}
}
