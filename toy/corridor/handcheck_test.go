package corridor

import (
	"math"
	"testing"
)

// These tests are the course's hand_check asserts, phase by phase, with its tolerances: 1e-12
// (near) or exact equality (same), and the hand-computed values written as the course writes them.

type check struct {
	name      string
	got, want float64
	exact     bool
}

func runChecks(t *testing.T, checks []check) {
	t.Helper()
	for _, c := range checks {
		if c.exact && c.got != c.want {
			t.Errorf("%s = %.17g, want exactly %v", c.name, c.got, c.want)
		}
		if !c.exact && !(math.Abs(c.got-c.want) < 1e-12) {
			t.Errorf("%s = %.17g, want %v (±1e-12)", c.name, c.got, c.want)
		}
	}
}

func near(name string, got, want float64) check { return check{name, got, want, false} }
func same(name string, got, want float64) check { return check{name, got, want, true} }

// Phase 1 step_api_demo: reset, two steps right to the goal, and ←→ ten times from the start,
// truncated at the 20th step (plus the hole, which the demo does not visit).
func TestPhase1_StepAPI(t *testing.T) {
	if err := StepAPIDemo(); err != nil {
		t.Fatal(err)
	}
	type out struct {
		obs         int
		r           float64
		term, trunc bool
	}
	alternate := make([]int, 20)
	for i := range alternate {
		alternate[i] = i % 2 // ←→←→…
	}
	for _, tc := range []struct {
		name    string
		actions []int
		want    out // after the last action
	}{
		{"→", []int{Right}, out{3, 0.0, false, false}},
		{"→→", []int{Right, Right}, out{4, 1.0, true, false}},
		{"(←→)×10", alternate, out{2, 0.0, false, true}},
		{"(←→)×9 ←", alternate[:19], out{1, 0.0, false, false}},
		{"←←", []int{Left, Left}, out{0, -1.0, true, false}},
	} {
		env := NewCorridor()
		if obs := env.Reset(); obs != 2 {
			t.Fatalf("Reset() = %d, want 2", obs)
		}
		var got out
		for _, a := range tc.actions {
			got.obs, got.r, got.term, got.trunc = env.Step(a)
		}
		if got != tc.want {
			t.Errorf("%s: last step = %+v, want %+v", tc.name, got, tc.want)
		}
	}
	env := NewCorridor()
	env.Reset()
	if got := env.Render(); got != "H . @ . G" {
		t.Errorf("Render() = %q, want %q", got, "H . @ . G")
	}
}

// Phase 1 hand_check: G_0 of each trajectory (식 (1.1)) equals the hand value and 식 (1.2)'s G_0.
func TestPhase1_HandCheck(t *testing.T) {
	rows, err := Phase1HandCheck()
	if err != nil {
		t.Fatal(err)
	}
	var checks []check
	for _, r := range rows {
		checks = append(checks, near(r.Name+" G_0", r.G0, r.HandG0), near(r.Name+" backward G_0", r.G0Backward, r.G0))
	}
	for i, want := range []float64{0.729, 0.81, 0.9, 1.0} { // 표 1.2
		checks = append(checks, near("←→→→ G_t", rows[1].Backward[i], want))
	}
	runChecks(t, checks)
}

// Phase 2 hand_check (1)-(5).
func TestPhase2_HandCheck(t *testing.T) {
	h := Phase2HandCheck()
	expect := []StateValues{{1: 0, 2: 0, 3: 0}, {1: -0.3, 2: 0, 3: 0.7}, {1: -0.3, 2: 0.36, 3: 0.7},
		{1: -0.0732, 2: 0.36, 3: 0.7972}} // 그림 2.2
	var checks []check
	for i, want := range expect {
		for _, s := range NonTerminal {
			checks = append(checks, near("sweep V", h.Sweeps3[i][s], want[s]))
		}
	}
	for _, s := range NonTerminal {
		checks = append(checks, near("sweep 200 = exact", h.Sweep200[s], h.Exact07[s]))
	}
	checks = append(checks,
		near("exact V(2)", h.Exact07[2], 0.36/0.6598),
		near("Q(2,→) = 0.9·V(3)", h.Q[2][Right], 0.9*h.Exact07[3]), // 표 2.1
		same("Q(1,←)", h.Q[1][Left], -1.0),
		near("Σ π Q = V(2)", 0.3*h.Q[2][Left]+0.7*h.Q[2][Right], h.Exact07[2]),
		near("MC V(1)", h.MC[1], 0.081), near("MC V(2)", h.MC[2], 0.1539), near("MC V(3)", h.MC[3], 0.1),
		same("TD V(1)", h.TD1[1], 0.0), same("TD V(2)", h.TD1[2], 0.0), same("TD V(3)", h.TD1[3], 0.1),
		near("2nd episode δ_0", h.Deltas2[0], 0.09), near("TD2 V(2)", h.TD2[2], 0.009),
		near("TD2 V(3)", h.TD2[3], 0.19))
	for i, want := range []float64{0.0, 0.0, 0.0, 1.0} {
		checks = append(checks, same("TD δ", h.Deltas1[i], want))
	}
	runChecks(t, checks)
}

// Phase 3 hand_check: Q* by value iteration, and Q after the scripted episodes A→B→C.
func TestPhase3_HandCheck(t *testing.T) {
	h := Phase3HandCheck()
	runChecks(t, []check{
		near("Q*(1,←)", h.QStar[1][Left], -1.0), near("Q*(1,→)", h.QStar[1][Right], 0.81),
		near("Q*(2,←)", h.QStar[2][Left], 0.729), near("Q*(2,→)", h.QStar[2][Right], 0.9),
		near("Q*(3,←)", h.QStar[3][Left], 0.81), near("Q*(3,→)", h.QStar[3][Right], 1.0),
		same("A: Q(2,→)", h.A[2][Right], 0.0), same("A: Q(3,→)", h.A[3][Right], 0.5),
		near("B: Q(2,→)", h.B[2][Right], 0.225), same("B: Q(3,→)", h.B[3][Right], 0.75),
		same("C: Q(2,←)", h.C[2][Left], 0.0), same("C: Q(1,←)", h.C[1][Left], -0.5),
	})
}

// Phase 4 hand_check: LinearQ reproduces Phase 3's numbers, one batch step of 표 4.1, and
// hand-written backprop equals central differences.
func TestPhase4_HandCheck(t *testing.T) {
	h := Phase4HandCheck()
	checks := []check{
		same("W[→][3]", h.Linear.W[Right][3], 0.75), near("W[→][2]", h.Linear.W[Right][2], 0.225),
		same("W[←][1]", h.Linear.W[Left][1], -0.5),
		near("batch loss", h.BatchLoss, 0.06625),
		near("W[→][2] after batch", h.LinearStep.W[Right][2], 0.3375),
		near("W[→][3] after batch", h.LinearStep.W[Right][3], 0.8125),
	}
	runChecks(t, checks)
	if len(h.Grad) != 5 {
		t.Fatalf("got %d gradient checks, want 5", len(h.Grad))
	}
	for _, g := range h.Grad {
		if !(math.Abs(g.Numeric-g.Analytic) < 1e-6) {
			t.Errorf("%s[%d][%d]: numeric %v, analytic %v", g.Param, g.I, g.J, g.Numeric, g.Analytic)
		}
	}
}

// Phase 5 hand_check: one REINFORCE update (α = 1) on scripted episodes, with and without baseline.
func TestPhase5_HandCheck(t *testing.T) {
	h := Phase5HandCheck()
	runChecks(t, []check{
		same("∇log π(→) at θ=0 [←]", h.GradZero[0], -0.5), same("∇log π(→) at θ=0 [→]", h.GradZero[1], 0.5),
		same("→→: θ_2[←]", h.Success[2][Left], -0.45), same("→→: θ_2[→]", h.Success[2][Right], 0.45),
		near("→→: P(→|2)", h.Success.PRight(2), sigmoid(0.9)), near("→→: P(→|3)", h.Success.PRight(3), sigmoid(1.0)),
		near("←←: P(→|2)", h.Failure.PRight(2), sigmoid(0.9)), near("←←: P(→|1)", h.Failure.PRight(1), sigmoid(1.0)),
		near("←→→→: θ_2[→]", h.Detour[2][Right], (0.9-0.729)/2),
		near("←→→→: P(→|2)", h.Detour.PRight(2), sigmoid(0.171)),
		near("baseline: P(→|1)", h.DetourBaseline.PRight(1), sigmoid(1.31)),
		near("baseline: P(→|3)", h.DetourBaseline.PRight(3), sigmoid(0.5)),
	})
}

// Phase 6 hand_check: GAE with λ = 1 (Monte Carlo), 0 (TD) and 0.5, and one actor-critic step.
func TestPhase6_HandCheck(t *testing.T) {
	h := Phase6HandCheck()
	var checks []check
	for i, want := range []float64{-0.45, 0.5, 0.45, 0.5} {
		checks = append(checks, near("δ", h.Deltas[i], want), near("A(λ=0) = δ", h.A0[i], h.Deltas[i]))
	}
	for i, want := range []float64{0.729, 1.31, 0.9, 0.5} {
		checks = append(checks, near("A(λ=1)", h.A1[i], want))
	}
	for i, want := range []float64{-0.0883125, 0.80375, 0.675, 0.5} {
		checks = append(checks, near("A(λ=0.5)", h.AHalf[i], want))
	}
	runChecks(t, append(checks, near("P(→|2) after δ step", h.Step.PRight(2), sigmoid(0.45))))
}

// Phase 7 hand_check: with the clip, P(→|2) crosses 0.6 = 1.2 × 0.5 at the third epoch and then
// stops; without it, it keeps rising past 0.92.
func TestPhase7_EpochDemo(t *testing.T) {
	withClip, noClip := EpochDemo(20, 0.2, 0.2, true), EpochDemo(20, 0.2, 0.2, false)
	if len(withClip) != 21 || len(noClip) != 21 {
		t.Fatalf("histories have %d and %d entries, want 21", len(withClip), len(noClip))
	}
	if !(withClip[2] < 0.6 && 0.6 < withClip[3]) {
		t.Errorf("with clip: P[2] = %v, P[3] = %v, want P[2] < 0.6 < P[3]", withClip[2], withClip[3])
	}
	for i, p := range withClip[3:] {
		if p != withClip[3] {
			t.Errorf("with clip: P[%d] = %v, want %v (zero gradient after the clip)", i+3, p, withClip[3])
		}
	}
	for i := range 4 {
		if withClip[i] != noClip[i] {
			t.Errorf("P[%d]: with clip %v, without %v, want equal", i, withClip[i], noClip[i])
		}
	}
	if !(noClip[20] > 0.92) {
		t.Errorf("without clip: final P = %v, want > 0.92", noClip[20])
	}
}
