package grpo

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// trainSteps runs a tiny GRPO run of c (fresh model, seed 3) and returns the final weights and
// every step's StepInfo.
func trainSteps(t *testing.T, c *Config) (map[string][]float32, []StepInfo) {
	t.Helper()
	m := tinyModel(t, 3)
	var infos []StepInfo
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: m,
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{countReward('c')},
		OnStep: func(s StepInfo) { infos = append(infos, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	ws, err := decoder.ExportWeights(m.Ctx, m.Config, "F32")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, w := range ws {
		f, err := w.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		out[w.Name] = f
	}
	return out, infos
}

func maxAbsDiff(a, b map[string][]float32) float64 {
	d := 0.0
	for k, x := range a {
		for i := range x {
			d = max(d, math.Abs(float64(x[i]-b[k][i])))
		}
	}
	return d
}

// resumeRun trains c on a fresh tiny model with the share of 'c' and a second reward until the
// end or, when stopAt > 0, until ctx is cancelled after step stopAt (the Ctrl-C path), and returns
// the final weights and Train's error.
func resumeRun(t *testing.T, c *Config, second Reward, stopAt int) (map[string][]float32, error) {
	t.Helper()
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	defer cancel(nil)
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), EvalPrompts: evalPrompts(),
		Rewards: []Reward{countReward('c'), second},
		OnStep: func(s StepInfo) {
			if s.Step == stopAt {
				cancel(checkpoint.ErrInterrupted)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Train(ctx)
	return modelWeights(t, tr), err
}

// A run interrupted during step 1 (the Ctrl-C path: the context is cancelled) stops after step 2,
// the end of its generation batch, saves a checkpoint, and resumed ends as a straight run, bit for
// bit: the weights, every metrics.jsonl line
// (apart from timings), completions.jsonl and eval_completions.jsonl. Weights, AdamW moments,
// prompt position and generation round are restored, and the resumed run generates the same
// fresh batches (TRL does not checkpoint rollouts either). The run is off-policy (2 iterations
// per generation batch), has a reference (β > 0) and evaluates every 2 steps. With logging every
// 3 steps the checkpoint falls inside a logging window, whose metrics are restored. The other
// loss types and the random reward: TestGRPO_ResumeEqualsStraightVariants.
func TestGRPO_ResumeEqualsStraight(t *testing.T) {
	first := firstLetter()
	first.Name = "first"
	for _, c := range []struct {
		name    string
		logging int
	}{{"first", 1}, {"window", 3}} {
		t.Run(c.name, func(t *testing.T) { resumeEqualsStraight(t, first, c.logging, "dapo") })
	}
}

// Every loss type resumes exactly too, and the "random" reward, whose call count is restored so
// that it draws what it would have drawn.
func TestGRPO_ResumeEqualsStraightVariants(t *testing.T) {
	first := firstLetter()
	first.Name = "first"
	for _, c := range []struct {
		name     string
		second   Reward
		lossType string
	}{
		{"random", randomReward(), "dapo"},
		{"grpo", first, "grpo"},
		{"bnpo", first, "bnpo"},
		{"dr_grpo", first, "dr_grpo"},
	} {
		t.Run(c.name, func(t *testing.T) { resumeEqualsStraight(t, c.second, 1, c.lossType) })
	}
}

func resumeEqualsStraight(t *testing.T, second Reward, logging int, lossType string) {
	config := func() *Config {
		c := tinyConfig(t)
		c.GradientCheckpointing = true // GRPO's default (TRL's)
		c.MaxSteps, c.LoggingSteps, c.NumIterations, c.Beta, c.LossType = 4, logging, 2, 0.04, lossType
		c.EvalDataset, c.EvalStrategy, c.EvalSteps, c.PerDeviceEvalBatchSize = "tiny-eval", "steps", 2, 8
		return c
	}
	straight := config()
	want, err := resumeRun(t, straight, second, 0)
	if err != nil {
		t.Fatal(err)
	}

	c := config()
	if _, err := resumeRun(t, c, second, 1); !errors.Is(err, loop.ErrInterrupted) || !strings.Contains(err.Error(), "grpo: stopped at step 2") {
		t.Fatalf("interrupted run: %v, want \"grpo: stopped at step 2\" wrapping loop.ErrInterrupted", err)
	}
	if _, err := os.Stat(filepath.Join(c.OutputDir, "checkpoint-2", checkpoint.StateName)); err != nil {
		t.Fatalf("the interrupted run saved no checkpoint-2: %v", err)
	}
	resumed := config()
	resumed.OutputDir, resumed.Resume = c.OutputDir, true
	got, err := resumeRun(t, resumed, second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("resumed run's weights differ from the straight run's by %g", d)
	}
	looptest.SameMetrics(t, filepath.Join(straight.OutputDir, runlog.MetricsName), filepath.Join(c.OutputDir, runlog.MetricsName))
	for _, name := range []string{runlog.CompletionsName, EvalCompletionsName} {
		a, err := os.ReadFile(filepath.Join(straight.OutputDir, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(c.OutputDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s differs between the straight and the resumed run (%d and %d bytes)", name, len(a), len(b))
		}
	}
}

// The saved window's values read back exactly, NaN and infinities included.
func TestWindowValues_RoundTrip(t *testing.T) {
	want := loop.ExactFloats{0.1, 1.0 / 3, -2.5e-300, 7, math.NaN(), math.Inf(1), math.Inf(-1), math.MaxFloat64}
	b, err := json.Marshal(map[string]loop.ExactFloats{"m": want})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]loop.ExactFloats
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if g := got["m"][i]; math.Float64bits(g) != math.Float64bits(w) && !(math.IsNaN(g) && math.IsNaN(w)) {
			t.Errorf("value %d: got %v from %s, want %v", i, g, b, w)
		}
	}
}

// Gradient accumulation: 2 micro-batches of 8 make the same update as one batch of 16, for the
// token-normalised (dapo) and the sequence-normalised (grpo) losses: every step's loss and
// grad_norm (the accumulated gradient, before AdamW) within 1e-5 relative, and the final weights
// within 1e-5 of ‖θ‖∞ (the data-parallel tests' criterion). The weights are not compared tighter:
// at learning rate 0.03, AdamW's step lr·m̂/(√v̂+ε) turns a float32 round-off δg of a gradient
// entry near ε = 1e-8 into up to lr·δg/ε, 3e6·δg (k_proj's gradients are such: softmax ignores
// what a key adds to every score of a query). Measured 2026-12-03: 2.8e-6 (k_proj.bias, pure Go),
// 1.6e-6 (k_proj.weight, XLA on an AVX-512 CPU); a mixed-up or mis-normalised accumulation moves
// the weights by up to lr = 0.03 and the grad_norm by its factor.
func TestGRPO_GradientAccumulationEqualsBigBatch(t *testing.T) {
	for _, lossType := range []string{"dapo", "grpo"} {
		one := tinyConfig(t)
		one.LossType, one.MaxSteps = lossType, 2
		want, wantSteps := trainSteps(t, one)
		two := tinyConfig(t)
		two.LossType, two.MaxSteps = lossType, 2
		two.PerDeviceTrainBatchSize, two.GradientAccumulationSteps = 8, 2
		got, gotSteps := trainSteps(t, two)
		if len(gotSteps) != len(wantSteps) {
			t.Fatalf("%s: %d steps, want %d", lossType, len(gotSteps), len(wantSteps))
		}
		for i, w := range wantSteps {
			g := gotSteps[i]
			for _, k := range []struct {
				name string
				g, w float64
			}{{"loss", g.Loss, w.Loss}, {"grad_norm", g.GradNorm, w.GradNorm}} {
				// The loss cancels to about 0 (centred advantages): against 1e-2 at least.
				if d := math.Abs(k.g - k.w); !(d <= 1e-5*math.Max(math.Abs(k.w), 1e-2)) {
					t.Errorf("%s step %d %s: GA 2×8 %.9g, batch 16 %.9g", lossType, i+1, k.name, k.g, k.w)
				}
			}
		}
		closeWeights(t, lossType+": GA 2×8 vs batch 16", want, got)
	}
}
