package tinylm

import (
	"bytes"
	"math"
	"testing"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// closeTo reports whether |got − want| < tol for every element (the course's asserts).
func closeTo(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %v, want %v", name, got, want)
	}
	for i := range got {
		if !(math.Abs(got[i]-want[i]) < tol) {
			t.Errorf("%s[%d] = %.17g, want %.17g (tol %g)", name, i, got[i], want[i], tol)
		}
	}
}

// Phase 8 hand_check asserts: log π(12⏎ | 3×4=) = log 0.4 + log 0.5 + log 0.8 (식 (8.1)-(8.2)).
func TestHandCheck8_SFTProbabilities(t *testing.T) {
	lm := New()
	logps := lm.TokenLogps("3×4=", MustParse("12⏎"))
	tests := []struct {
		name      string
		got, want []float64
	}{
		{"token log-probs", logps, []float64{math.Log(0.4), math.Log(0.5), math.Log(0.8)}},
		{"π(12⏎)", []float64{math.Exp(sum(logps))}, []float64{0.16}},
		{"p_correct", []float64{PCorrect(lm, "3×4="), PCorrect(lm, "2×3=")}, []float64{0.16, 0.24}},
	}
	for _, tc := range tests {
		closeTo(t, tc.name, tc.got, tc.want, 1e-12)
	}
}

// Phase 8 hand_check: one REINFORCE step (R = 1, baseline 0, α = 1) on 12⏎ raises π(1|3×4=)
// 0.400 → 0.6163 and P(12⏎) 0.160 → 0.3451 (식 (8.3)).
func TestHandCheck8_OneReinforceStep(t *testing.T) {
	lm := New()
	x, y := "3×4=", MustParse("12⏎")
	g := NewGrads()
	g.AddSeq(lm, x, y, 1.0*Verify(x, y))
	lm.Apply(g, 1.0)
	p0, pc := lm.Dist(x, nil)[0], PCorrect(lm, x)
	if !(p0 > 0.4 && pc > 0.16) {
		t.Errorf("after one step π(1) = %v, P(12⏎) = %v; want > 0.4 and > 0.16", p0, pc)
	}
	if got := pyfmt.Fixed(p0, 4, false) + " " + pyfmt.Fixed(pc, 4, false); got != "0.6163 0.3451" {
		t.Errorf("printed %q, want \"0.6163 0.3451\"", got)
	}
}

// Phase 9 hand_check: one Bradley–Terry step from 0 gives r(12⏎) = +0.5, r(7⏎) = −0.5
// (식 (9.1)-(9.2)); the first loss is log 2; σ(1) prints 0.7311.
func TestHandCheck9_RewardModelFirstStep(t *testing.T) {
	rm := TrainRewardModel(Preferences[:1], 1, 1.0)
	want := []RMScore{{"3×4=", "12⏎", 0.5}, {"3×4=", "7⏎", -0.5}}
	got := rm.Entries()
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("one step = %v, want %v", got, want)
	}
	if !(math.Abs(-math.Log(Sigmoid(0))-math.Log(2)) < 1e-12) {
		t.Errorf("−log σ(0) = %v, want log 2", -math.Log(Sigmoid(0)))
	}
	if got := pyfmt.RoundRepr(Sigmoid(1), 4); got != "0.7311" {
		t.Errorf("σ(1) prints %s, want 0.7311", got)
	}
	if s := rm.Score("3×4=", "127"); s != 0 {
		t.Errorf("unseen response scores %v, want 0", s)
	}
}

// Phase 10 hand_check: at π = π_ref, m = 0, the DPO loss is log 2 and the coefficient β·σ(0) = 0.05
// (식 (10.3)), for every preference pair.
func TestHandCheck10_DPOAtReference(t *testing.T) {
	for _, p := range Preferences {
		lm := New()
		loss, coef, m := DPOLossAndCoef(lm, lm.Copy(), p.Prompt, MustParse(p.Chosen), MustParse(p.Rejected), 0.1)
		if m != 0.0 || !(math.Abs(loss-math.Log(2)) < 1e-12) || !(math.Abs(coef-0.05) < 1e-12) {
			t.Errorf("%v: m = %v, loss = %v, coef = %v; want 0, log 2, 0.05", p, m, loss, coef)
		}
	}
}

// Phase 11 hand_check: the verifier rewards 12⏎ and nothing else for 3×4=.
func TestHandCheck11_Verify(t *testing.T) {
	tests := []struct {
		prompt, response string
		want             float64
	}{
		{"3×4=", "12⏎", 1}, {"3×4=", "7⏎", 0}, {"3×4=", "1⏎", 0}, {"3×4=", "12", 0},
		{"3×4=", "127", 0}, {"3×4=", "⏎", 0}, {"2×3=", "6⏎", 1}, {"2×3=", "12⏎", 0},
	}
	for _, tc := range tests {
		if got := Verify(tc.prompt, MustParse(tc.response)); got != tc.want {
			t.Errorf("Verify(%s, %s) = %v, want %v", tc.prompt, tc.response, got, tc.want)
		}
	}
}

// Phase 12 hand_check: per-token weights of each variant at ratio 1 (rewards [1,0,0,1], lengths
// [3,2,2,3]), tolerance 1e-3 as the course's close().
func TestHandCheck12_TokenWeights(t *testing.T) {
	rewards, lengths := []float64{1, 0, 0, 1}, []int{3, 2, 2, 3}
	aStd := rl.GroupAdvantagesStd(rewards, rl.AdvEps)
	aMean := rl.GroupAdvantagesMean(rewards)
	aRLOO := rl.GroupAdvantagesRLOO(rewards)
	tests := []struct {
		name string
		got  []float64
		want []float64
	}{
		{"A mean", aMean, []float64{0.5, -0.5, -0.5, 0.5}},
		{"A rloo", aRLOO, []float64{0.667, -0.667, -0.667, 0.667}},
		{"GRPO", TokenWeights(aStd, lengths, AggSeqMean), []float64{0.0833, -0.125, -0.125, 0.0833}},
		{"DAPO", TokenWeights(aStd, lengths, AggTokenMean), []float64{0.1, -0.1, -0.1, 0.1}},
		{"Dr. GRPO", TokenWeights(aMean, lengths, AggConst), []float64{0.0417, -0.0417, -0.0417, 0.0417}},
		{"RLOO (printed)", TokenWeights(aRLOO, lengths, AggSeqMean), []float64{0.0556, -0.0833, -0.0833, 0.0556}},
	}
	for _, tc := range tests {
		closeTo(t, tc.name, tc.got, tc.want, 1e-3)
	}
}

// TokenWeights (the course's table) and AggWeight (what GRPOLossGrads uses) agree.
func TestAggWeight_MatchesTokenWeights(t *testing.T) {
	adv, lengths := []float64{0.7, -1.3, 0.2}, []int{1, 3, 2}
	for _, agg := range []Agg{AggSeqMean, AggTokenMean, AggConst} {
		tw := TokenWeights(adv, lengths, agg)
		for i := range adv {
			got := adv[i] * AggWeight(agg, len(lengths), lengths[i], 6)
			if math.Abs(got-tw[i]) > 1e-15 {
				t.Errorf("%s[%d]: %v vs %v", agg, i, got, tw[i])
			}
		}
	}
}

// Phase 12 hand_check: with A > 0 and ratio 1.25, GRPO's ε = 0.2 already stops the token while
// DAPO's clip-higher 1 + 0.28 still lets it learn; GSPO's ratio of log ratios [0.10, −0.05, 0.02]
// is their geometric mean 1.0236.
func TestHandCheck12_ClipHigherAndGSPO(t *testing.T) {
	if _, coef := rl.PPOClipTerm(1.25, 1.0, 0.2); coef != 0 {
		t.Errorf("PPOClipTerm(1.25, 1, 0.2) coef = %v, want 0", coef)
	}
	tests := []struct {
		ratio, adv, lo, hi, want float64
	}{
		{1.25, 1, 0.2, 0.2, 0},     // GRPO: clipped
		{1.25, 1, 0.2, 0.28, 1.25}, // DAPO: still learning
		{1.25, -1, 0.2, 0.2, -1.25},
		{0.7, -1, 0.2, 0.28, 0}, // below 1 − ε with A < 0: clipped
		{0.7, 1, 0.2, 0.28, 0.7},
	}
	for _, tc := range tests {
		if got := ClipCoef(tc.ratio, tc.adv, tc.lo, tc.hi); got != tc.want {
			t.Errorf("ClipCoef(%v, %v, %v, %v) = %v, want %v", tc.ratio, tc.adv, tc.lo, tc.hi, got, tc.want)
		}
	}
	s := SequenceRatio([]float64{0.10, -0.05, 0.02}, []float64{0, 0, 0})
	if !(math.Abs(s-1.02360) < 1e-4) {
		t.Errorf("GSPO ratio = %v, want 1.02360", s)
	}
}

// Each HandCheck passes and prints the course's hand-check lines (the first lines of each phase).
func TestHandChecks_Pass(t *testing.T) {
	for i, hc := range []func(*bytes.Buffer) error{
		func(b *bytes.Buffer) error { return HandCheck8(b) },
		func(b *bytes.Buffer) error { return HandCheck9(b) },
		func(b *bytes.Buffer) error { return HandCheck10(b) },
		func(b *bytes.Buffer) error { return HandCheck11(b) },
		func(b *bytes.Buffer) error { return HandCheck12(b) },
	} {
		var b bytes.Buffer
		if err := hc(&b); err != nil {
			t.Errorf("phase %d: %v", i+8, err)
		}
		if b.Len() == 0 {
			t.Errorf("phase %d: printed nothing", i+8)
		}
	}
}
