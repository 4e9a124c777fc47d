package schedule

import (
	"math"
	"testing"
)

// Expected values are HF transformers' lambdas (optimization.py, get_*_schedule_with_warmup)
// evaluated by hand; T = 10 total steps, W = 2 warmup steps.
func TestMultiplier_MatchesHF(t *testing.T) {
	cases := []struct {
		typ  Type
		step int
		want float64
	}{
		{Linear, 0, 0},                   // 0/2
		{Linear, 1, 0.5},                 // 1/2
		{Linear, 2, 1},                   // (10-2)/8
		{Linear, 6, 0.5},                 // (10-6)/8
		{Linear, 9, 0.125},               // (10-9)/8
		{Linear, 10, 0},                  // end of training
		{Linear, 12, 0},                  // clamped at 0
		{Cosine, 1, 0.5},                 // warmup
		{Cosine, 2, 1},                   // ½(1+cos 0)
		{Cosine, 4, 0.5 + math.Sqrt2/4},  // p=¼: ½(1+cos π/4) = 0.853553…
		{Cosine, 6, 0.5},                 // p=½: ½(1+cos π/2)
		{Cosine, 10, 0},                  // p=1: ½(1+cos π)
		{Cosine, 12, 0.5 - math.Sqrt2/4}, // HF does not clamp past T: ½(1+cos 5π/4)
		{Constant, 0, 1},                 // no warmup even if W > 0
		{Constant, 7, 1},
		{ConstantWithWarmup, 0, 0},
		{ConstantWithWarmup, 1, 0.5},
		{ConstantWithWarmup, 2, 1},
		{ConstantWithWarmup, 50, 1},
	}
	for _, c := range cases {
		s, err := New(c.typ, 1e-3, 2, 10)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Multiplier(c.step); math.Abs(got-c.want) > 1e-15 {
			t.Errorf("%s step %d: got %.17g, want %.17g", c.typ, c.step, got, c.want)
		}
		if got, want := s.LR(c.step), 1e-3*c.want; math.Abs(got-want) > 1e-18 {
			t.Errorf("%s step %d: LR got %g, want %g", c.typ, c.step, got, want)
		}
	}
}

func TestMultiplier_NoWarmup(t *testing.T) {
	s, _ := New(Linear, 1, 0, 4)
	for step, want := range []float64{1, 0.75, 0.5, 0.25, 0} {
		if got := s.Multiplier(step); got != want {
			t.Errorf("linear W=0 step %d: got %g, want %g", step, got, want)
		}
	}
	// W ≥ T: max(1, T−W) keeps the division finite, as in HF.
	s, _ = New(Linear, 1, 5, 5)
	if got := s.Multiplier(5); got != 0 {
		t.Errorf("linear W=T step T: got %g, want 0", got)
	}
}

func TestWarmupSteps(t *testing.T) {
	cases := []struct {
		steps int
		ratio float64
		total int
		want  int
	}{
		{0, 0, 100, 0},
		{0, 0.1, 25, 3},   // ceil(2.5)
		{0, 0.07, 100, 8}, // ceil(7.000000000000001), exactly as Python's math.ceil(100*0.07)
		{0, 0.05, 100, 5}, // 100*0.05 == 5 exactly
		{7, 0.5, 100, 7},  // warmup_steps wins over the ratio
	}
	for _, c := range cases {
		if got := WarmupSteps(c.steps, c.ratio, c.total); got != c.want {
			t.Errorf("WarmupSteps(%d, %g, %d) = %d, want %d", c.steps, c.ratio, c.total, got, c.want)
		}
	}
}

func TestNew_RejectsUnknownType(t *testing.T) {
	if _, err := New("polynomial", 1, 0, 10); err == nil {
		t.Fatal("want error for unknown type")
	}
	if _, err := New(Linear, 1, -1, 10); err == nil {
		t.Fatal("want error for negative warmup")
	}
}
