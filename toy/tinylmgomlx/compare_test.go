package tinylmgomlx

import (
	"math"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/toy/tinylm"
)

var testBackend = sync.OnceValue(func() backends.Backend { return backend.MustNewForTests() })

// sameJSON compares two results with Compare (keys and their order, strings, numbers to tol).
func sameJSON(t *testing.T, name string, got, want any, tol float64) {
	t.Helper()
	d, err := Compare(got, want, tol)
	if err != nil {
		t.Errorf("%s: %v", name, err)
	}
	t.Logf("%s: max |GoMLX − oracle| over all numbers = %.3g", name, d)
}

// sameRows checks the rows' creation order exactly and their values to tol, and logs the largest
// difference (to see how far the GoMLX path is from the oracle).
func sameRows(t *testing.T, name string, got, want tinylm.Logits, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		if got[i].Key != want[i].Key {
			t.Fatalf("%s: row %d is %v, want %v (creation order)", name, i, got[i].Key, want[i].Key)
		}
		for j := range want[i].Logits {
			worst = max(worst, math.Abs(got[i].Logits[j]-want[i].Logits[j]))
		}
	}
	if worst > tol {
		t.Errorf("%s: logits differ by up to %g, want ≤ %g", name, worst, tol)
	}
	t.Logf("%s: %d rows, max |GoMLX − oracle| = %.3g", name, len(want), worst)
}

func TestDPO_MatchesOracle(t *testing.T) {
	got, err := RunDPO(testBackend(), tinylm.DefaultDPO())
	if err != nil {
		t.Fatal(err)
	}
	want := tinylm.RunDPO(tinylm.DefaultDPO())
	sameJSON(t, "dpo", got, want, 1e-9)
	sameRows(t, "dpo_logits", got.Logits, want.Logits, 1e-9)
}

func TestKTO_MatchesOracle(t *testing.T) {
	got, err := RunKTO(testBackend(), tinylm.DefaultKTO())
	if err != nil {
		t.Fatal(err)
	}
	want := tinylm.RunKTO(tinylm.DefaultKTO())
	sameJSON(t, "kto", got, want, 1e-9)
	sameRows(t, "kto_logits", got.Logits, want.Logits, 1e-9)
}

func TestReinforceKL_MatchesOracle(t *testing.T) {
	for _, beta := range tinylm.Phase8Betas {
		cfg := tinylm.DefaultReinforceKL(beta)
		got, err := RunReinforceKL(testBackend(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		want := tinylm.RunReinforceKL(cfg)
		sameJSON(t, "reinforce", got, want, 1e-9)
		sameRows(t, "reinforce logits", got.Logits, want.Logits, 1e-9)
	}
}

func TestRLHF_MatchesOracle(t *testing.T) {
	got, err := RunRLHF(testBackend(), tinylm.DefaultRLHF())
	if err != nil {
		t.Fatal(err)
	}
	want := tinylm.RunRLHF(tinylm.DefaultRLHF())
	sameJSON(t, "rlhf", got, want, 1e-9)
	sameRows(t, "rlhf logits", got.Logits, want.Logits, 1e-9)
}

func TestGRPO_MatchesOracle(t *testing.T) {
	got, err := RunGRPO(testBackend(), tinylm.DefaultGRPO())
	if err != nil {
		t.Fatal(err)
	}
	want := tinylm.RunGRPO(tinylm.DefaultGRPO())
	sameJSON(t, "grpo", got, want, 1e-9)
	sameRows(t, "grpo logits", got.Logits, want.Logits, 1e-9)
}

func TestVariants_MatchOracle(t *testing.T) {
	cfg := tinylm.DefaultGRPO()
	cfg.Iterations = tinylm.Phase12Iterations
	got, err := RunVariants(testBackend(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := tinylm.RunPhase12()
	sameJSON(t, "variants", got, want, 1e-9)
	for i := range want.Variants {
		sameRows(t, want.Variants[i].Name+" logits", got.Variants[i].Logits, want.Variants[i].Logits, 1e-9)
	}
}
