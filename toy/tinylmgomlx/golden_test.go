package tinylmgomlx

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/toy/tinylm"
)

// golden reads the course's golden of a phase (copied verbatim by toy/tinylm, see its
// testdata/README.md) as raw JSON values per key.
func golden(t *testing.T, phase string) map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "tinylm", "testdata", phase+".json"))
	if err != nil {
		t.Fatalf("golden %s: %v", phase, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The GoMLX path against the course's own numbers (CPython 3.11), not only against the oracle.
func TestGoldens_Phase9To11(t *testing.T) {
	b := testBackend()
	dpoRes, err := RunDPO(b, tinylm.DefaultDPO())
	if err != nil {
		t.Fatal(err)
	}
	ktoRes, err := RunKTO(b, tinylm.DefaultKTO())
	if err != nil {
		t.Fatal(err)
	}
	rlhf, err := RunRLHF(b, tinylm.DefaultRLHF())
	if err != nil {
		t.Fatal(err)
	}
	grpoRes, err := RunGRPO(b, tinylm.DefaultGRPO())
	if err != nil {
		t.Fatal(err)
	}
	g9, g10, g11 := golden(t, "phase09"), golden(t, "phase10"), golden(t, "phase11")
	for _, c := range []struct {
		name string
		got  any
		want json.RawMessage
	}{
		{"phase09.reward_model", rlhf.RewardModel, g9["reward_model"]},
		{"phase09.results", rlhf.Results, g9["results"]},
		{"phase09.logits", rlhf.Logits, g9["logits"]},
		{"phase09.samples_head", rlhf.SamplesHead, g9["samples_head"]},
		{"phase10.dpo", dpoRes.Results, g10["dpo"]},
		{"phase10.dpo_implicit_reward", dpoRes.ImplicitReward, g10["dpo_implicit_reward"]},
		{"phase10.dpo_logits", dpoRes.Logits, g10["dpo_logits"]},
		{"phase10.kto", ktoRes.Results, g10["kto"]},
		{"phase10.kto_logits", ktoRes.Logits, g10["kto_logits"]},
		{"phase11.results", grpoRes.Results, g11["results"]},
		{"phase11.logits", grpoRes.Logits, g11["logits"]},
		{"phase11.samples_head", grpoRes.SamplesHead, g11["samples_head"]},
	} {
		if len(c.want) == 0 {
			t.Fatalf("%s: missing from the golden", c.name)
		}
		d, err := Compare(c.got, c.want, 1e-12)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		t.Logf("%s: max |GoMLX − golden| = %.3g", c.name, d)
	}
}

func TestCompare_CatchesDifferences(t *testing.T) {
	base := tinylm.Logits{{Key: tinylm.Key{Prompt: "a", Prefix: ""}, Logits: []float64{1, 2}},
		{Key: tinylm.Key{Prompt: "a", Prefix: "1"}, Logits: []float64{3, 4}}}
	swapped := tinylm.Logits{base[1], base[0]}
	off := tinylm.Logits{base[0], {Key: base[1].Key, Logits: []float64{3, 4 + 1e-6}}}
	for _, c := range []struct {
		name      string
		got, want any
		errSub    string
	}{
		{"row order", swapped, base, "got a|1"},
		{"value", off, base, "differ by"},
		{"sample", []tinylm.Sample{{Prompt: "x", Response: "12⏎"}}, []tinylm.Sample{{Prompt: "x", Response: "1⏎"}}, "got 12⏎"},
	} {
		if _, err := Compare(c.got, c.want, 1e-9); err == nil || !strings.Contains(err.Error(), c.errSub) {
			t.Errorf("%s: Compare err = %v, want one containing %q", c.name, err, c.errSub)
		}
	}
	if d, err := Compare(base, base, 0); err != nil || d != 0 {
		t.Errorf("Compare(x, x) = %v, %v; want 0, nil", d, err)
	}
}

func TestGoldens_Phase8And12(t *testing.T) {
	b := testBackend()
	var runs []tinylm.ReinforceKLResult
	for _, beta := range tinylm.Phase8Betas {
		r, err := RunReinforceKL(b, tinylm.DefaultReinforceKL(beta))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	cfg := tinylm.DefaultGRPO()
	cfg.Iterations = tinylm.Phase12Iterations
	variants, err := RunVariants(b, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		got  any
		want json.RawMessage
	}{
		{"phase08.runs", runs, golden(t, "phase08")["runs"]},
		{"phase12.variants", variants.Variants, golden(t, "phase12")["variants"]},
	} {
		d, err := Compare(c.got, c.want, 1e-12)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		t.Logf("%s: max |GoMLX − golden| = %.3g", c.name, d)
	}
}
