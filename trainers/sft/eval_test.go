package sft_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// eval_loss is transformers' evaluation_loop value: each eval batch's mean NLL over its scored
// tokens, weighted by its rows: 7 rows in batches of 3 (3, 3, 1), computed batch by batch with
// decoder.TargetLogProbs (Trainer.BatchNLL), before training (eval_on_start) and after the last
// step (eval_strategy epoch ends inside a pass at max_steps). It differs from the token-weighted
// mean over the set (checked, so that the test tells the two rules apart).
func TestSFTEval_LossIsMeanNLL(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	b := looptest.Backend(t)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-2, 4, 1, 3)
	cfg.EvalStrategy, cfg.EvalOnStart, cfg.PerDeviceEvalBatchSize = "epoch", true, 3
	train, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 24, 1)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	held, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 7, 2)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hfLoss := func() float64 {
		sums, counts, err := held.BatchNLL(b, 3)
		if err != nil {
			t.Fatal(err)
		}
		loss := 0.0
		for i, rows := range []float64{3, 3, 1} {
			loss += rows * sums[i] / counts[i]
		}
		tokenMean, err := held.NLL(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(loss/7-tokenMean) < 1e-4 {
			t.Fatalf("batch-weighted %.7f and token-weighted %.7f coincide: the test cannot tell the rules apart", loss/7, tokenMean)
		}
		return loss / 7
	}
	before := hfLoss()
	if _, err := loop.Run(context.Background(), m, loop.WithEval(train, held), loop.Options{Config: cfg, Backend: b}); err != nil {
		t.Fatal(err)
	}
	after := hfLoss()
	recs, err := runlog.ReadMetrics(filepath.Join(cfg.OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	var evals []runlog.Record
	for _, r := range recs {
		if _, ok := r.Metrics["eval_loss"]; ok {
			evals = append(evals, r)
		}
	}
	if len(evals) != 2 || evals[0].Step != 0 || evals[1].Step != 3 {
		t.Fatalf("eval lines %v, want steps 0 and 3", evals)
	}
	for i, want := range []float64{before, after} {
		got := evals[i].Metrics["eval_loss"]
		t.Logf("step %d: eval_loss %.7f, NLL %.7f", evals[i].Step, got, want)
		if math.Abs(got-want) > 1e-5*want {
			t.Errorf("step %d: eval_loss = %.7f, want HF's batch-weighted mean NLL %.7f", evals[i].Step, got, want)
		}
	}
	if after > before-0.1 {
		t.Errorf("NLL %.4f → %.4f: want training to lower it", before, after)
	}
	for _, r := range evals {
		if acc := r.Metrics["eval_mean_token_accuracy"]; !(acc >= 0 && acc <= 1) {
			t.Errorf("step %d: eval_mean_token_accuracy %v", r.Step, acc)
		}
		if e := r.Metrics["eval_entropy"]; !(e > 0 && e <= math.Log(float64(m.Config.VocabSize))+1e-4) {
			t.Errorf("step %d: eval_entropy %v outside (0, ln V]", r.Step, e)
		}
	}
}
