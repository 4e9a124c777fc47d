package rl

import (
	"math"
	"testing"
)

// Phase 7 hand_check of ppo_clip_term (식 (7.2)), with the course's exact comparisons.
func TestPPOClipTerm_Phase7HandCheck(t *testing.T) {
	for _, tc := range []struct {
		name            string
		ratio, adv      float64
		wantObj, wantCo float64
		exact           bool
	}{
		{"good action already raised: stop", 1.4, 0.9, 1.2 * 0.9, 0.0, true},
		{"bad action already lowered: stop", 0.6, -0.5, 0.8 * -0.5, 0.0, true},
		{"inside the range: plain policy gradient", 1.1, 0.9, 0.99, 0.99, false},
		{"good action lowered by mistake: undo", 0.6, 0.5, 0.3, 0.3, true},
		{"bad action raised by mistake: undo", 1.5, -1.0, -1.5, -1.5, true},
	} {
		obj, coef := PPOClipTerm(tc.ratio, tc.adv, 0.2)
		if tc.exact && (obj != tc.wantObj || coef != tc.wantCo) {
			t.Errorf("%s: PPOClipTerm(%v, %v) = (%v, %v), want exactly (%v, %v)",
				tc.name, tc.ratio, tc.adv, obj, coef, tc.wantObj, tc.wantCo)
		}
		if !tc.exact && (math.Abs(obj-tc.wantObj) >= 1e-12 || math.Abs(coef-tc.wantCo) >= 1e-12) {
			t.Errorf("%s: PPOClipTerm(%v, %v) = (%v, %v), want (%v, %v)",
				tc.name, tc.ratio, tc.adv, obj, coef, tc.wantObj, tc.wantCo)
		}
	}
}
