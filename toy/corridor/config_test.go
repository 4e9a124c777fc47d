package corridor

import (
	"math"
	"strings"
	"testing"
)

// Bad settings are rejected up front with a message naming the setting (its CLI flag).
func TestConfigs_RejectBadValues(t *testing.T) {
	p1 := DefaultPhase1()
	p1.P = []float64{0.5, 1.5}
	p4 := DefaultPhase4()
	p4.BatchSize = 2000
	p4b := DefaultPhase4()
	p4b.LearningStarts = 3
	p5 := DefaultPhase5()
	p5.State = 4
	p6 := DefaultPhase6()
	p6.EpisodesPerBatch = 0
	p7 := DefaultPhase7()
	p7.Eps = math.NaN()
	p2 := DefaultPhase2()
	p2.Gamma = 1.5
	p3 := DefaultPhase3()
	p3.Epsilon = -0.1
	for _, tc := range []struct {
		err  error
		flag string
	}{
		{p1.Validate(), "p"}, {p2.Validate(), "gamma"}, {p3.Validate(), "epsilon"},
		{p4.Validate(), "batch-size"}, {p4b.Validate(), "batch-size"}, {p5.Validate(), "state"},
		{p6.Validate(), "episodes-per-batch"}, {p7.Validate(), "eps"},
	} {
		if tc.err == nil || !strings.HasPrefix(tc.err.Error(), tc.flag) {
			t.Errorf("got error %v, want one starting with %q", tc.err, tc.flag)
		}
	}
	for i, err := range []error{DefaultPhase1().Validate(), DefaultPhase2().Validate(), DefaultPhase3().Validate(),
		DefaultPhase4().Validate(), DefaultPhase5().Validate(), DefaultPhase6().Validate(), DefaultPhase7().Validate()} {
		if err != nil {
			t.Errorf("phase %d defaults: %v", i+1, err)
		}
	}
}

// Other settings run too, and change the printed numbers where they should.
func TestPhase1_OtherSettings(t *testing.T) {
	c := DefaultPhase1()
	c.P, c.DemoSeeds, c.Episodes = []float64{0.0, 1.0}, 0, 100
	r, err := RunPhase1(c)
	if err != nil {
		t.Fatal(err)
	}
	lines := r.Lines()
	want := []string{"P(→)=0.0: J ≈ -0.9000", "P(→)=1.0: J ≈ +0.9000"} // deterministic policies
	if got := lines[len(lines)-2:]; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("last lines = %q, want %q", got, want)
	}
	if len(r.Demos) != 0 {
		t.Errorf("got %d demo episodes, want 0", len(r.Demos))
	}
}

// The corridor truncates after 20 steps; a truncated episode's GAE bootstraps from V(S_T).
func TestCorridor_Truncation(t *testing.T) {
	env := NewCorridor()
	env.Reset()
	for i := range 20 {
		_, _, term, trunc := env.Step(i % 2) // ←→←→…
		if term || trunc != (i == 19) {
			t.Fatalf("step %d: terminated=%v truncated=%v", i+1, term, trunc)
		}
	}
}
