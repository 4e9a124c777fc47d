package tinylm

import (
	"math"
	"testing"

	"github.com/posttrain/posttrain/internal/pyrand"
)

func TestShowParse_RoundTrip(t *testing.T) {
	for _, s := range []string{"12⏎", "⏎", "127", "6⏎", "77"} {
		tok, err := Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := Show(tok); got != s {
			t.Errorf("Show(Parse(%q)) = %q", s, got)
		}
	}
	for _, bad := range []string{"3", "1<eos>", "x"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q): want an error", bad)
		}
	}
}

// The rows start at log(SFT_PROBS) for the three listed prefixes and log(DEFAULT_PROBS) elsewhere,
// and their softmax gives those probabilities back (they sum to 1 already).
func TestDist_StartsAtSFTProbs(t *testing.T) {
	lm := New()
	tests := []struct {
		prompt string
		prefix string
		want   []float64
	}{
		{"3×4=", "", []float64{0.4, 0.1, 0.05, 0.4, 0.05}},
		{"3×4=", "1", []float64{0.1, 0.5, 0.05, 0.05, 0.3}},
		{"2×3=", "", []float64{0.2, 0.1, 0.3, 0.3, 0.1}},
		{"2×3=", "6", []float64{0.05, 0.05, 0.05, 0.05, 0.8}},
		{"3×4=", "12", []float64{0.05, 0.05, 0.05, 0.05, 0.8}},
	}
	for _, tc := range tests {
		closeTo(t, tc.prompt+"|"+tc.prefix, lm.Dist(tc.prompt, MustParse(tc.prefix)), tc.want, 1e-15)
	}
	want := []string{"3×4=|", "3×4=|1", "2×3=|", "2×3=|6", "3×4=|12"}
	for i, r := range lm.Logits() {
		if r.Key.String() != want[i] {
			t.Errorf("row %d = %s, want %s (creation order)", i, r.Key, want[i])
		}
	}
}

// AllResponses enumerates the 85 responses (1 + 4·(1 + 4·5)); their probabilities sum to 1, and
// KL(π‖π) = 0.
func TestAllResponses_SumToOne(t *testing.T) {
	lm := New()
	for _, x := range Prompts {
		rs := AllResponses(lm, x)
		if len(rs) != 85 {
			t.Errorf("%s: %d responses, want 85", x, len(rs))
		}
		total := 0.0
		for _, r := range rs {
			total += r.Prob
			if math.Abs(math.Exp(SeqLogp(lm, x, r.Tokens))-r.Prob) > 1e-15 {
				t.Errorf("%s %s: prob %v vs exp(seq_logp)", x, Show(r.Tokens), r.Prob)
			}
		}
		if math.Abs(total-1) > 1e-12 {
			t.Errorf("%s: Σ prob = %v", x, total)
		}
		if kl := KL(lm, lm.Copy(), x); kl != 0 {
			t.Errorf("%s: KL(π‖π) = %v", x, kl)
		}
	}
	rows, keys := lm.Logits(), RowKeys()
	if len(rows) != 42 || len(keys) != 42 {
		t.Fatalf("%d rows after enumerating both prompts and %d RowKeys, want 42", len(rows), len(keys))
	}
	for i, r := range rows {
		if r.Key != keys[i] {
			t.Errorf("row %d: AllResponses created %s, RowKeys has %s", i, r.Key, keys[i])
		}
	}
}

// GradToken is ∂ log π(y_t)/∂(row) = onehot − π: check it against central differences.
func TestGradToken_FiniteDifference(t *testing.T) {
	lm := New()
	x, y := "3×4=", MustParse("12⏎")
	for tt := range y {
		key, g := lm.GradToken(x, y, tt)
		row := lm.rows[key]
		for i := range row {
			h := 1e-6
			orig := row[i]
			row[i] = orig + h
			up := lm.TokenLogps(x, y)[tt]
			row[i] = orig - h
			down := lm.TokenLogps(x, y)[tt]
			row[i] = orig
			if fd := (up - down) / (2 * h); math.Abs(fd-g[i]) > 1e-8 {
				t.Errorf("t=%d %s[%d]: grad %v, finite difference %v", tt, key, i, g[i], fd)
			}
		}
	}
}

func TestCopyAndSetLogits(t *testing.T) {
	lm := New()
	lm.Dist("3×4=", nil)
	c := lm.Copy()
	g := NewGrads()
	g.AddSeq(lm, "3×4=", MustParse("7⏎"), 1)
	lm.Apply(g, 1)
	if c.Logits()[0].Logits[3] == lm.Logits()[0].Logits[3] {
		t.Error("Copy shares rows with the original")
	}
	other := New()
	other.SetLogits(lm.Logits())
	for i, r := range other.Logits() {
		want := lm.Logits()[i]
		if r.Key != want.Key {
			t.Fatalf("row %d: %s, want %s", i, r.Key, want.Key)
		}
		closeTo(t, r.Key.String(), r.Logits, want.Logits, 0.5e-300)
	}
	if rows := g.Rows(); len(rows) != 2 || rows[0].Key.String() != "3×4=|" || rows[1].Key.String() != "3×4=|7" {
		t.Errorf("grad rows %v, want 3×4=| then 3×4=|7", rows)
	}
}

// Sampling consumes exactly one random() per token.
func TestSample_OneRandomPerToken(t *testing.T) {
	lm := New()
	a, b := pyrand.New(7), pyrand.New(7)
	for range 50 {
		y := lm.Sample("2×3=", a)
		if len(y) == 0 || len(y) > MaxNewTokens || (len(y) < MaxNewTokens && y[len(y)-1] != EOS) {
			t.Fatalf("bad response %v", y)
		}
		for range y {
			b.Random()
		}
	}
	if a.Random() != b.Random() {
		t.Error("random streams diverged")
	}
}

func TestValidate(t *testing.T) {
	bad := []interface{ Validate() error }{
		ReinforceKLConfig{Beta: -1, Iterations: 1, Group: 1, LR: 1},
		ReinforceKLConfig{Iterations: 0, Group: 1, LR: 1},
		RLHFConfig{},
		PrefConfig{Beta: 0.1, Epochs: 0, LR: 1},
		GRPOConfig{Variant: DefaultVariant, Iterations: 1, G: 1, Epochs: 1, LR: 1},
		GRPOConfig{Variant: GRPOVariant{Adv: "median"}, Iterations: 1, G: 8, Epochs: 1, LR: 1},
	}
	for i, c := range bad {
		if c.Validate() == nil {
			t.Errorf("case %d %+v: want an error", i, c)
		}
	}
	good := []interface{ Validate() error }{DefaultReinforceKL(0.5), DefaultRLHF(), DefaultDPO(), DefaultKTO(), DefaultGRPO()}
	for _, v := range Variants {
		cfg := DefaultGRPO()
		cfg.Variant = v.Cfg
		good = append(good, cfg)
	}
	for i, c := range good {
		if err := c.Validate(); err != nil {
			t.Errorf("default %d: %v", i, err)
		}
	}
}
