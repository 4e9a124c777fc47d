package grpo

import (
	stdctx "context"
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// familyRun trains c (the reward: the first byte of the completion, graded) on a fresh copy of the fixture checkpoint at dir (stopping after step stopAt
// when > 0) and returns every step's info, the final weights and Train's error.
func familyRun(t *testing.T, dir string, c *Config, stopAt int) ([]StepInfo, map[string][]float32, error) {
	t.Helper()
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	defer cancel(nil)
	var infos []StepInfo
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: looptest.Load(t, dir, false),
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{firstLetter()},
		OnStep: func(s StepInfo) {
			infos = append(infos, s)
			if s.Step == stopAt {
				cancel(checkpoint.ErrInterrupted)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Train(ctx)
	return infos, modelWeights(t, tr), err
}

// GRPO on the tiny Qwen3, Llama and SmolLM2-form checkpoints: on-policy, step 1's loss is 0 with
// a non-zero gradient and the sampler's log-probs (KV cache, in-graph sampling at T = 0.7) equal
// the trainer's; 2 steps straight equal 1 step, an interruption and a resumed step, bit for bit
// (weights, metrics, completions); the saved model loads back.
func TestGRPO_Families(t *testing.T) {
	for _, fixture := range looptest.Fixtures {
		t.Run(fixture, func(t *testing.T) {
			dir := looptest.Fixture(t, fixture)
			newConfig := func() *Config {
				c := tinyConfig(t)
				c.Model, c.LossType, c.Temperature, c.MaxSteps, c.MaxCompletionLength = dir, "grpo", 0.7, 2, 4
				return c
			}
			straight := newConfig()
			infos, want, err := familyRun(t, dir, straight, 0)
			if err != nil {
				t.Fatal(err)
			}
			s := infos[0]
			if math.Abs(s.Loss) > 1e-6 || !(s.GradNorm > 1e-4) {
				t.Errorf("step 1: loss %g (want 0), grad norm %g (want > 0)", s.Loss, s.GradNorm)
			}
			d := s.Metrics["sampling/sampling_logp_difference/max"]
			if !(d < 1e-5) {
				t.Errorf("max |sampling − training log-prob| = %g, want < 1e-5", d)
			}
			t.Logf("max |sampling − training log-prob| %.2g", d)

			c := newConfig()
			if _, _, err := familyRun(t, dir, c, 1); !errors.Is(err, loop.ErrInterrupted) {
				t.Fatalf("interrupted run: %v, want loop.ErrInterrupted", err)
			}
			resumed := newConfig()
			resumed.OutputDir, resumed.Resume = c.OutputDir, true
			_, got, err := familyRun(t, dir, resumed, 0)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxAbsDiff(got, want); d != 0 {
				t.Errorf("resumed run's weights differ from the straight run's by %g", d)
			}
			looptest.SameMetrics(t, filepath.Join(straight.OutputDir, runlog.MetricsName), filepath.Join(c.OutputDir, runlog.MetricsName))
			if m := looptest.Load(t, c.OutputDir, false); m.Config.ModelType != looptest.Load(t, dir, false).Config.ModelType {
				t.Errorf("saved model_type %q", m.Config.ModelType)
			}
		})
	}
}
