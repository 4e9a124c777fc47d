package rl

import (
	"math"
	"testing"
)

func near(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values %v, want %d %v", name, len(got), got, len(want), want)
	}
	for i := range got {
		if !(math.Abs(got[i]-want[i]) <= tol) {
			t.Errorf("%s[%d] = %.17g, want %.17g", name, i, got[i], want[i])
		}
	}
}

// Phase 11 and 12 hand_check asserts on group_advantages (식 (11.1), (12.1)), tolerance 1e-3 as
// the course's close().
func TestGroupAdvantages_Phase11And12HandChecks(t *testing.T) {
	tests := []struct {
		phase   string
		rewards []float64
		mode    AdvMode
		want    []float64
	}{
		{"11", []float64{1, 0, 0, 1}, AdvStd, []float64{1, -1, -1, 1}},
		{"11", []float64{1, 0, 0, 0}, AdvStd, []float64{1.732, -0.577, -0.577, -0.577}},
		{"12", []float64{1, 0, 0, 1}, AdvMean, []float64{0.5, -0.5, -0.5, 0.5}},
		{"12", []float64{1, 0, 0, 1}, AdvRLOO, []float64{0.667, -0.667, -0.667, 0.667}},
	}
	for _, tc := range tests {
		got, err := GroupAdvantages(tc.rewards, tc.mode)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "phase "+tc.phase+" "+string(tc.mode), got, tc.want, 1e-3)
	}
}

// Phase 11: group_advantages([1, 1, 1, 1]) == [0.0, 0.0, 0.0, 0.0] exactly (no signal).
func TestGroupAdvantagesStd_EqualRewardsAreExactlyZero(t *testing.T) {
	for _, mode := range []AdvMode{AdvStd, AdvMean, AdvRLOO} {
		got, err := GroupAdvantages([]float64{1, 1, 1, 1}, mode)
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range got {
			if a != 0 {
				t.Errorf("%s: A[%d] = %v, want exactly 0", mode, i, a)
			}
		}
	}
}

// The exact values the course prints for phase 11 before rounding: (1 − 0.5)/(0.5 + 1e-4).
func TestGroupAdvantagesStd_PopulationStd(t *testing.T) {
	got := GroupAdvantagesStd([]float64{1, 0, 0, 1}, AdvEps)
	want := 0.5 / (0.5 + 1e-4)
	near(t, "std", got, []float64{want, -want, -want, want}, 1e-15)
}

func TestGroupAdvantages_Errors(t *testing.T) {
	if _, err := GroupAdvantages([]float64{1}, AdvRLOO); err == nil {
		t.Error("rloo with one reward: want an error")
	}
	if _, err := GroupAdvantages([]float64{1, 0}, "bogus"); err == nil {
		t.Error("unknown mode: want an error")
	}
}

// TRL v0.24 divides by the sample std (n − 1); values from Python's statistics.stdev.
func TestTRLAdvantages_ScaleRewards(t *testing.T) {
	rewards := []float64{1, 0, 0, 1, 1, 0, 0, 0} // two groups of 4
	tests := []struct {
		scale   ScaleRewards
		wantAdv []float64
		wantStd []float64
	}{
		{ScaleGroup,
			[]float64{0.8658754297607016, -0.8658754297607016, -0.8658754297607016, 0.8658754297607016,
				1.4997000599880024, -0.4999000199960008, -0.4999000199960008, -0.4999000199960008},
			[]float64{0.5773502691896257, 0.5773502691896257, 0.5773502691896257, 0.5773502691896257,
				0.5, 0.5, 0.5, 0.5}},
		{ScaleBatch,
			[]float64{0.9659051524730883, -0.9659051524730883, -0.9659051524730883, 0.9659051524730883,
				1.4488577287096325, -0.48295257623654414, -0.48295257623654414, -0.48295257623654414},
			[]float64{0.5175491695067657, 0.5175491695067657, 0.5175491695067657, 0.5175491695067657,
				0.5175491695067657, 0.5175491695067657, 0.5175491695067657, 0.5175491695067657}},
		{ScaleNone,
			[]float64{0.5, -0.5, -0.5, 0.5, 0.75, -0.25, -0.25, -0.25},
			[]float64{0.5773502691896257, 0.5773502691896257, 0.5773502691896257, 0.5773502691896257,
				0.5, 0.5, 0.5, 0.5}},
	}
	for _, tc := range tests {
		adv, std, err := TRLAdvantages(rewards, 4, tc.scale)
		if err != nil {
			t.Fatal(err)
		}
		near(t, string(tc.scale)+" adv", adv, tc.wantAdv, 1e-14)
		near(t, string(tc.scale)+" std", std, tc.wantStd, 1e-15)
	}
}

// Dr. GRPO in TRL (scale_rewards=none) is the course's mean mode, group by group.
func TestTRLAdvantages_NoneEqualsCourseMean(t *testing.T) {
	rewards := []float64{1, 0, 0.5, 1, 0, 0}
	adv, _, err := TRLAdvantages(rewards, 3, ScaleNone)
	if err != nil {
		t.Fatal(err)
	}
	want := append(GroupAdvantagesMean(rewards[:3]), GroupAdvantagesMean(rewards[3:])...)
	near(t, "none", adv, want, 0)
}

func TestTRLAdvantages_Errors(t *testing.T) {
	if _, _, err := TRLAdvantages([]float64{1, 0, 1}, 2, ScaleGroup); err == nil {
		t.Error("3 rewards in groups of 2: want an error")
	}
	if _, _, err := TRLAdvantages([]float64{1, 0}, 1, ScaleGroup); err == nil {
		t.Error("num_generations 1: want an error")
	}
	if _, _, err := TRLAdvantages([]float64{1, 0}, 2, "sometimes"); err == nil {
		t.Error("bad scale_rewards: want an error")
	}
}
