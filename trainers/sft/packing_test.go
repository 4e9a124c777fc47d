package sft_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// packedRun trains one step over every example of path (one micro-batch holds them all) from the
// fixture's starting weights and returns the logged metrics and the trainer.
func packedRun(t *testing.T, path string, packing bool, strategy string) (map[string]float64, *sft.Trainer, *sft.Config) {
	t.Helper()
	m := looptest.Load(t, looptest.Model(t), false)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-2, 64, 1, 1)
	cfg.MaxLength, cfg.Packing, cfg.PackingStrategy = 256, packing, strategy
	tr, err := sft.New(m, looptest.Read(t, path), cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := loop.Run(context.Background(), m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Last.Metrics, tr, cfg
}

// bfd packing changes the layout, not the numbers: when one step covers the same examples, the
// token-normalised loss (TRL's num_items_in_batch), mean_token_accuracy, entropy and num_tokens
// equal the unpacked run's, while the rows, and so the optimizer steps per epoch, are fewer.
// wrapped packing lets an example attend to the one before it, so its loss differs.
func TestSFT_PackedBFDEqualsUnpacked(t *testing.T) {
	path := looptest.MultFile(t, mult.SFT, 16, 5)
	plain, unpacked, cfg := packedRun(t, path, false, "bfd")
	packed, bfd, _ := packedRun(t, path, true, "bfd")
	t.Logf("unpacked: %d rows, %v; bfd: %d rows, %v", unpacked.NumExamples(), plain, bfd.NumExamples(), packed)
	for _, k := range []string{"loss", "mean_token_accuracy", "entropy", "num_tokens"} {
		if got, want := packed[k], plain[k]; !(math.Abs(got-want) <= 2e-6*math.Max(1, math.Abs(want))) {
			t.Errorf("%s: bfd packed %.8f, unpacked %.8f", k, got, want)
		}
	}
	if got, want := packed["grad_norm"], plain["grad_norm"]; !(math.Abs(got-want) <= 1e-5*want) {
		t.Errorf("grad_norm: bfd packed %.8f, unpacked %.8f", got, want)
	}
	units := func(tr *sft.Trainer) (n float64) {
		for i := range tr.NumExamples() {
			n += tr.Units(i)
		}
		return n
	}
	if got, want := units(bfd), units(unpacked); got != want {
		t.Errorf("scored tokens: bfd %v, unpacked %v", got, want)
	}
	cfg.PerDeviceTrainBatchSize, cfg.MaxSteps, cfg.NumTrainEpochs = 2, -1, 1
	if got, plain := cfg.TotalSteps(bfd.NumExamples()), cfg.TotalSteps(unpacked.NumExamples()); !(got < plain) || plain != 8 {
		t.Errorf("steps per epoch at batch 2: bfd %d, unpacked %d; want fewer than 8 packed, 8 unpacked", got, plain)
	}

	wrapped, wr, _ := packedRun(t, path, true, "wrapped")
	if got, want := wrapped["num_tokens"], plain["num_tokens"]; got != want {
		t.Errorf("wrapped num_tokens %v, want %v (no example is cut off)", got, want)
	}
	if math.Abs(wrapped["loss"]-plain["loss"]) < 1e-4 {
		t.Errorf("wrapped loss %.6f ≈ unpacked %.6f: attention across examples should change it", wrapped["loss"], plain["loss"])
	}
	if wr.NumExamples() > bfd.NumExamples() {
		t.Errorf("wrapped: %d rows, more than bfd's %d", wr.NumExamples(), bfd.NumExamples())
	}
}

// Packing with no row length is refused with a line naming max_length.
func TestSFT_PackingNeedsMaxLength(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	cfg := sft.DefaultConfig()
	cfg.Packing, cfg.MaxLength = true, 0
	if _, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 2, 1)), cfg); err == nil {
		t.Fatal("packing with max_length 0: no error")
	} else if want := "packing needs max_length ≥ 1"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want one containing %q", err, want)
	}
}
