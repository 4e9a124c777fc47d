package dpo_test

import (
	"math"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

func run(t *testing.T, cfg *dpo.Config, pairs int) []runlog.Record {
	t.Helper()
	m := looptest.Load(t, looptest.Model(t), false)
	b := looptest.Backend(t)
	tr, err := dpo.New(b, m, looptest.Read(t, looptest.MultFile(t, mult.DPO, pairs, 7)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
	return recs
}

// DPO's first step starts from policy = reference: loss ln 2, zero margins (the TRL invariant);
// training on the multiplication pairs then makes the margins grow.
func TestDPO_StepOneIsLn2AndMarginsGrow(t *testing.T) {
	cfg := dpo.DefaultConfig()
	looptest.Common(t, &cfg.Training, 5e-3, 4, 2, 6)
	recs := run(t, cfg, 16)
	first, last := recs[0].Metrics, recs[len(recs)-1].Metrics
	t.Logf("step 1: %v", first)
	t.Logf("step %d: %v", recs[len(recs)-1].Step, last)
	if got := first["loss"]; math.Abs(got-math.Ln2) > 1e-5 {
		t.Errorf("step 1 loss = %.8f, want ln 2 = %.8f", got, math.Ln2)
	}
	if got := first["rewards/margins"]; math.Abs(got) > 1e-5 {
		t.Errorf("step 1 rewards/margins = %g, want 0", got)
	}
	for _, k := range []string{"rewards/chosen", "rewards/rejected", "rewards/accuracies", "logps/chosen", "logps/rejected", "grad_norm", "learning_rate"} {
		if _, ok := first[k]; !ok {
			t.Errorf("metrics lack %q", k)
		}
	}
	if !(last["rewards/margins"] > 0.05 && last["loss"] < math.Ln2-0.01) {
		t.Errorf("after %d steps: margins %v, loss %v; want margins > 0.05 and loss below ln 2", len(recs), last["rewards/margins"], last["loss"])
	}
}

// IPO's first step is (0 − 1/(2β))² = 25 at β = 0.1, and its loss goes down.
func TestDPO_IPOStepOne(t *testing.T) {
	cfg := dpo.DefaultConfig()
	cfg.LossType = []string{"ipo"}
	looptest.Common(t, &cfg.Training, 5e-3, 4, 1, 3)
	recs := run(t, cfg, 8)
	if got := recs[0].Metrics["loss"]; math.Abs(got-25) > 1e-3 {
		t.Errorf("step 1 IPO loss = %v, want 25", got)
	}
	if !(recs[2].Metrics["loss"] < recs[0].Metrics["loss"]) {
		t.Errorf("IPO loss %v → %v, want it to go down", recs[0].Metrics["loss"], recs[2].Metrics["loss"])
	}
}

// Several loss types (TRL loss_type list with loss_weights): at step one (policy = reference) the
// loss is Σ w_i·L_i(m = 0) = 1·ln 2 + 0.04·(1/(2β))² + ½·nll_loss, every type on length-normalised
// log-probs because ipo is listed, and nll_loss is logged because sft is.
func TestDPO_LossListStepOne(t *testing.T) {
	cfg := dpo.DefaultConfig()
	cfg.LossType, cfg.LossWeights = []string{"sigmoid", "ipo", "sft"}, []float64{1, 0.04, 0.5}
	looptest.Common(t, &cfg.Training, 5e-3, 4, 1, 2)
	recs := run(t, cfg, 8)
	first := recs[0].Metrics
	nll, ok := first["nll_loss"]
	if !ok || !(nll > 0) {
		t.Fatalf("nll_loss = %v (logged %v), want > 0", nll, ok)
	}
	if want := math.Ln2 + 0.04*25 + 0.5*nll; math.Abs(first["loss"]-want) > 1e-4 {
		t.Errorf("step 1 loss = %.6f, want ln2 + 0.04·25 + ½·%.6f = %.6f", first["loss"], nll, want)
	}
	if got := first["rewards/margins"]; math.Abs(got) > 1e-5 {
		t.Errorf("step 1 rewards/margins = %g, want 0", got)
	}
	if !(recs[1].Metrics["loss"] < first["loss"]) {
		t.Errorf("loss %v → %v, want it to go down", first["loss"], recs[1].Metrics["loss"])
	}
}

// reference_free (TRL: the reference log-probs are 0 in dpo_loss's logits, not in the rewards): at
// step one the policy is the reference, so rewards/margins is still 0 while the loss is
// mean softplus(−β·(log π(y_w) − log π(y_l))) over the pairs, not ln 2; with one pair per
// micro-batch and per step that is softplus(−β·(logps/chosen − logps/rejected)) exactly.
func TestDPO_ReferenceFreeStepOne(t *testing.T) {
	cfg := dpo.DefaultConfig()
	cfg.ReferenceFree = true
	looptest.Common(t, &cfg.Training, 5e-3, 1, 1, 2)
	first := run(t, cfg, 4)[0].Metrics
	want := math.Log1p(math.Exp(-cfg.Beta * (first["logps/chosen"] - first["logps/rejected"])))
	if got := first["loss"]; math.Abs(got-want) > 1e-5 || math.Abs(got-math.Ln2) < 1e-4 {
		t.Errorf("step 1 loss = %.7f, want softplus(−β·(%.5f − %.5f)) = %.7f (≠ ln 2)", got, first["logps/chosen"], first["logps/rejected"], want)
	}
	if got := first["rewards/margins"]; math.Abs(got) > 1e-6 {
		t.Errorf("rewards/margins = %g, want 0 (TRL's rewards use the real reference)", got)
	}
}
