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

// Evaluation before the first step has policy = reference on the eval pairs too (their reference
// log-probs are computed once, from the starting weights): eval_loss = ln 2 and zero rewards, the
// TRL invariant, under TRL's "eval_"-prefixed names. After training, the eval margins have moved.
func TestDPOEval_OnStartIsLn2(t *testing.T) {
	cfg := dpo.DefaultConfig()
	looptest.Common(t, &cfg.Training, 5e-3, 4, 1, 4)
	cfg.EvalStrategy, cfg.EvalSteps, cfg.EvalOnStart, cfg.PerDeviceEvalBatchSize = "steps", 4, true, 3
	m := looptest.Load(t, looptest.Model(t), false)
	b := looptest.Backend(t)
	tr, err := dpo.New(b, m, looptest.Read(t, looptest.MultFile(t, mult.DPO, 16, 7)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := dpo.New(b, m, looptest.Read(t, looptest.MultFile(t, mult.DPO, 5, 8)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b, Eval: ev})
	var evals []runlog.Record
	for _, r := range recs {
		if _, ok := r.Metrics["eval_loss"]; ok {
			evals = append(evals, r)
		}
	}
	if len(evals) != 2 || evals[0].Step != 0 || evals[1].Step != 4 {
		t.Fatalf("eval lines %v, want steps 0 and 4", evals)
	}
	first, last := evals[0].Metrics, evals[1].Metrics
	t.Logf("step 0: %v", first)
	if got := first["eval_loss"]; math.Abs(got-math.Ln2) > 1e-6 {
		t.Errorf("step 0 eval_loss = %.8f, want ln 2 = %.8f", got, math.Ln2)
	}
	for _, k := range []string{"eval_rewards/chosen", "eval_rewards/rejected", "eval_rewards/margins"} {
		if got, ok := first[k]; !ok || math.Abs(got) > 1e-6 {
			t.Errorf("step 0 %s = %v (present %v), want 0", k, got, ok)
		}
	}
	for _, k := range []string{"eval_rewards/accuracies", "eval_logps/chosen", "eval_logps/rejected", "eval_logits/chosen", "eval_logits/rejected"} {
		if _, ok := first[k]; !ok {
			t.Errorf("eval metrics lack %q", k)
		}
	}
	if last["eval_rewards/margins"] == 0 || last["eval_loss"] == first["eval_loss"] {
		t.Errorf("after 4 steps: eval %v; want the margins to have moved", last)
	}
}
