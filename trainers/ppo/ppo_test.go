package ppo

import (
	stdctx "context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/config"
	"github.com/posttrain/posttrain/trainers/loop"
	"github.com/posttrain/posttrain/trainers/loop/looptest"
)

// rewardModel writes a *ForSequenceClassification checkpoint (num_labels 1, a score head drawn
// from seed) of the causal LM in dir, as `posttrain reward` would start one, and returns its path.
func rewardModel(t testing.TB, dir string, seed uint64) string {
	t.Helper()
	m, _, err := loop.LoadClassifier(dir, false, 1, seed)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "reward_model")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// tinyConfig is a 2-update run on 8 prompts: rollout batches of 2 × 2, 2 PPO epochs of 2
// mini-batches (8 optimizer steps per update), 6-token responses.
func tinyConfig(t testing.TB, policy, rm string) *config.PPO {
	c := config.DefaultPPO()
	c.Model, c.Dataset, c.RewardModelPath = policy, "rows", rm
	c.OutputDir = filepath.Join(t.TempDir(), "out")
	c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps = 1, 4
	c.NumPPOEpochs, c.NumMiniBatches = 2, 2
	c.ResponseLength, c.LocalRolloutForwardBatchSize = 6, 4
	c.MaxSteps, c.LoggingSteps, c.SaveSteps = 2, 1, 0
	c.LearningRate, c.LRSchedulerType = 3e-3, "constant"
	c.StopToken = "eos"
	c.Seed = 5
	c.Resolve()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func tinyRows() []data.Row {
	var rows []data.Row
	for _, p := range []string{"3×4=", "2×3=", "7×8=", "1×9=", "5×5=", "6×2=", "4×4=", "9×9="} {
		rows = append(rows, data.Row{Prompt: data.Text{String: p}})
	}
	return rows
}

// run trains c on tinyRows, cancelling after update stopAt when > 0, and returns every update's
// info and Run's error.
func run(t testing.TB, c *config.PPO, stopAt int) ([]UpdateInfo, error) {
	t.Helper()
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	defer cancel(nil)
	var infos []UpdateInfo
	_, err := Run(ctx, c, c.Model, RunOptions{Backend: looptest.Backend(t), Rows: tinyRows(), OnUpdate: func(u UpdateInfo) {
		infos = append(infos, u)
		if u.Update == stopAt {
			cancel(checkpoint.ErrInterrupted)
		}
	}})
	return infos, err
}

// Step-1 invariants: before any optimizer step the policy is the reference (objective/kl 0) and
// the first micro-batch of the first PPO epoch sees ratio 1 (approxkl 0, clipfrac 0); later
// updates move the policy away (objective/kl ≠ 0).
func TestPPO_Step1Invariants(t *testing.T) {
	policy := looptest.Model(t)
	c := tinyConfig(t, policy, rewardModel(t, policy, 3))
	infos, err := run(t, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 2 {
		t.Fatalf("%d updates, want 2", len(infos))
	}
	u := infos[0]
	t.Logf("update 1: %v", u.Metrics)
	t.Logf("first micro-batch: %v", u.First)
	if kl := u.Metrics["objective/kl"]; kl != 0 {
		t.Errorf("update 1 objective/kl = %g, want 0 (policy = reference)", kl)
	}
	if f := u.First; f["policy/approxkl"] != 0 || f["policy/clipfrac"] != 0 || f["val/ratio"] != 1 {
		t.Errorf("first micro-batch: approxkl %g clipfrac %g ratio %.17g, want 0, 0, 1", f["policy/approxkl"], f["policy/clipfrac"], f["val/ratio"])
	}
	if kl := infos[1].Metrics["objective/kl"]; kl == 0 || math.IsNaN(kl) {
		t.Errorf("update 2 objective/kl = %g, want ≠ 0 after 8 optimizer steps", kl)
	}
	if lr := u.Metrics["lr"]; lr != 3e-3 {
		t.Errorf("lr %g, want 3e-3", lr)
	}
	if ep := infos[1].Metrics["episode"]; ep != 8 {
		t.Errorf("episode %g after 2 updates of 4, want 8", ep)
	}
}
