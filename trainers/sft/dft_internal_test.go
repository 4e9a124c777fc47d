package sft

import (
	"context"
	"math"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// directDFT computes, in float64 on the host from the full logits [B,S,V] of tr's examples idx
// under m's current weights, TRL's dft_loss over them as one accumulated batch,
// Σ_{b,t} m_bt·(−p·log p) / Σ m_bt, and their NLL Σ m_bt·(−log p) / Σ m_bt.
func directDFT(t *testing.T, b backends.Backend, m *trainable.Model, tr *Trainer, idx []int) (dft, nll float64) {
	t.Helper()
	in, err := tr.Batch(idx)
	if err != nil {
		t.Fatal(err)
	}
	_, lsm := looptest.FullLogits(t, b, m, in)
	ids, scored := in.Get("IDs").([][]int32), in.Get("Loss").([][]float32)
	s, v := len(ids[0]), m.Config.VocabSize
	var sumDFT, sumNLL, n float64
	for r := range ids {
		for p := 1; p < s; p++ {
			if scored[r][p] == 0 {
				continue
			}
			lp := lsm[(r*s+p-1)*v+int(ids[r][p])] // the logits at p−1 score the token at p
			sumDFT, sumNLL, n = sumDFT-math.Exp(lp)*lp, sumNLL-lp, n+1
		}
	}
	return sumDFT / n, sumNLL / n
}

// runLoss runs cfg from the model saved in dir and returns the step-1 metrics line.
func runLoss(t *testing.T, dir, path string, cfg *Config) map[string]float64 {
	t.Helper()
	m := looptest.Load(t, dir, false)
	tr, err := New(m, looptest.Read(t, path), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t)})
	return recs[0].Metrics
}

// At step 1, loss_type dft logs TRL's dft_loss of the accumulated batch: GA 2 × batch 2 over four
// examples, each micro-batch's Σ −p·log p divided by the four examples' scored tokens
// (num_items_in_batch), equals Σ m·(−p·log p) / Σ m computed here from the full logits. The same
// examples packed (bfd, one micro-batch) log the same loss, and mean_token_accuracy and entropy
// are logged as with nll. The run starts from weights first trained by NLL SFT, so that the
// probabilities, and so the weights, differ from token to token (a random model's are all ≈ 1/V).
func TestSFT_DFTStepOneLoss(t *testing.T) {
	path, b := looptest.MultFile(t, mult.SFT, 4, 3), looptest.Backend(t)
	warm := DefaultConfig()
	looptest.Common(t, &warm.Training, 1e-2, 4, 1, 8)
	m := looptest.Load(t, looptest.Model(t), false)
	trWarm, err := New(m, looptest.Read(t, path), warm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Run(context.Background(), m, trWarm, loop.Options{Config: warm, Backend: b}); err != nil {
		t.Fatal(err)
	}
	want, nll := directDFT(t, b, m, trWarm, []int{0, 1, 2, 3})

	cfg := DefaultConfig()
	cfg.LossType = "dft"
	looptest.Common(t, &cfg.Training, 1e-2, 2, 2, 1)
	got := runLoss(t, warm.OutputDir, path, cfg)
	t.Logf("step 1: loss %.7f, want %.7f (NLL %.5f, mean p weight ≈ %.3f)", got["loss"], want, nll, want/nll)
	if math.Abs(got["loss"]-want) > 1e-5*math.Max(1, want) {
		t.Errorf("dft loss = %.7f, want Σ m·(−p·log p) / Σ m = %.7f", got["loss"], want)
	}
	if r := want / nll; !(r > 0.05 && r < 0.95) {
		t.Errorf("DFT/NLL = %.4f: the weights are ≈ 0 or ≈ 1, the check is degenerate", r)
	}
	for _, k := range []string{"mean_token_accuracy", "entropy", "num_tokens"} {
		if _, ok := got[k]; !ok {
			t.Errorf("metrics line lacks %q: %v", k, got)
		}
	}

	packed := DefaultConfig()
	packed.LossType, packed.Packing, packed.MaxLength = "dft", true, 256
	looptest.Common(t, &packed.Training, 1e-2, 4, 1, 1)
	if p := runLoss(t, warm.OutputDir, path, packed)["loss"]; math.Abs(p-want) > 2e-6*math.Max(1, want) {
		t.Errorf("bfd packed dft loss = %.7f, want %.7f", p, want)
	}
}
