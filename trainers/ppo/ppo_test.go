package ppo

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// rewardModel writes a *ForSequenceClassification checkpoint (num_labels 1, a score head drawn
// from seed) of the causal LM in dir, as `posttrain reward` would start one, and returns its path.
func rewardModel(t testing.TB, dir string, seed uint64) string {
	t.Helper()
	m, _, err := trainable.LoadClassifier(dir, false, 1, seed)
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
func tinyConfig(t testing.TB, policy, rm string) *Config {
	c := DefaultConfig()
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
func run(t testing.TB, c *Config, stopAt int) ([]UpdateInfo, error) {
	t.Helper()
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	defer cancel(nil)
	var infos []UpdateInfo
	_, err := Run(ctx, c, c.Model, RunOptions{Env: loop.Env{Backend: looptest.Backend(t)}, Rows: tinyRows(), OnUpdate: func(u UpdateInfo) {
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
	checkRatioOne(t, "first micro-batch", u.First)
	// TRL's statistics tensors are (epochs 2, mini-batches 2, gradient_accumulation_steps 4): each
	// mini-batch fills 2 of its 4 entries, and the logged means count the zeros left.
	if len(u.Micro) != 8 {
		t.Fatalf("%d micro-batches, want 2 epochs × 2 mini-batches × 2", len(u.Micro))
	}
	sum := 0.0
	for _, m := range u.Micro {
		sum += m["val/ratio"]
	}
	if got, want := u.Metrics["val/ratio"], sum/16; math.Abs(got-want) > 1e-12 || math.Abs(got-0.5) > 0.05 {
		t.Errorf("logged val/ratio %.17g, want Σ micro ratios / 16 = %.17g (about 0.5)", got, want)
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
	// The sampler and the rollout's forward pass compute the same float32 distribution.
	if d, f := u.Metrics["sampling/sampling_logp_difference/max"], u.Metrics["sampling/ratio_outside_0.9_1.1"]; !(d > 0 && d < 1e-4) || f != 0 {
		t.Errorf("sampling/training gap: max |Δ| %g, outside the band %g; want 0 < max < 1e-4 and none outside", d, f)
	}
}

// The first micro-batch's new log-probs are those of the rollout's policy, so its ratio is 1,
// approxkl and clipfrac 0, to float32 round-off: the rollout's log-probs and the training step's
// come from two executables, which the pure-Go backend evaluates in the same order (exactly 1 and
// 0 there) but XLA fuses each on its own (measured 2026-12-02 on xla:cpu: ratio 1 ± 1 ulp,
// 0.99999994 and 1.00000012, approxkl up to 3.2e-14). ratioTol is 4 ulps of 1 (2⁻²¹) and klTol
// the approxkl of a log-prob error of 1.4e-6 (½Δ²); an old log-prob from another policy,
// temperature or mask is off by far more.
const ratioTol, klTol = 0x1p-21, 1e-12

func checkRatioOne(t *testing.T, what string, f map[string]float64) {
	t.Helper()
	if math.Abs(f["val/ratio"]-1) > ratioTol || math.Abs(f["policy/approxkl"]) > klTol || f["policy/clipfrac"] != 0 {
		t.Errorf("%s: approxkl %g clipfrac %g ratio %.17g, want 0 (within %g), 0, 1 (within %g)", what,
			f["policy/approxkl"], f["policy/clipfrac"], f["val/ratio"], klTol, ratioTol)
	}
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(x) != string(y) {
		t.Errorf("%s and %s differ", a, b)
	}
}

// resumeCheck runs c's updates straight, and again interrupted (Ctrl-C) after update 1 then
// resumed: the final policy and value model are the same bytes, and so are metrics.jsonl's lines
// (timings aside). The resume restores the policy, the value model, AdamW's state of both, the
// prompt position and the sampler's round.
func resumeCheck(t *testing.T, newConfig func() *Config, updates int) {
	t.Helper()
	straight := newConfig()
	straight.MaxSteps = updates
	if _, err := run(t, straight, 0); err != nil {
		t.Fatal(err)
	}
	c := newConfig()
	c.MaxSteps = updates
	if _, err := run(t, c, 1); !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("interrupted run: %v, want loop.ErrInterrupted", err)
	}
	if _, err := os.Stat(filepath.Join(c.OutputDir, "checkpoint-1", trainable.ValueDir, "model.safetensors")); err != nil {
		t.Fatalf("checkpoint-1 has no value model: %v", err)
	}
	resumed := newConfig()
	resumed.OutputDir, resumed.Resume, resumed.MaxSteps = c.OutputDir, true, updates
	if _, err := run(t, resumed, 0); err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(straight.OutputDir, "model.safetensors"), filepath.Join(c.OutputDir, "model.safetensors"))
	sameFile(t, filepath.Join(straight.OutputDir, trainable.ValueDir, "model.safetensors"), filepath.Join(c.OutputDir, trainable.ValueDir, "model.safetensors"))
	looptest.SameMetrics(t, filepath.Join(straight.OutputDir, runlog.MetricsName), filepath.Join(c.OutputDir, runlog.MetricsName))
}

// Bit-exact resume of policy, value model and optimizer state, with k3, reward whitening off and
// a missing-EOS penalty (every branch of the rollout's processing but whitening, which needs ≥ 8
// rows per mini-batch).
func TestPPO_ResumeExact(t *testing.T) {
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 3)
	resumeCheck(t, func() *Config {
		c := tinyConfig(t, policy, rm)
		c.KLEstimator, c.MissingEOSPenalty = "k3", 1
		return c
	}, 3)
}

// The value model trains: on one rollout batch seen 6 times (num_ppo_epochs 6, one mini-batch
// of the whole batch), the value loss falls, and the value model's weights in OUTPUT_DIR/value_model
// differ from the reward model it started from.
func TestPPO_ValueModelTrains(t *testing.T) {
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 3)
	c := tinyConfig(t, policy, rm)
	c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps, c.NumMiniBatches, c.NumPPOEpochs = 4, 1, 1, 6
	c.MaxSteps, c.VFCoef, c.LearningRate = 1, 1, 1e-3
	infos, err := run(t, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, m := range infos[0].Micro {
		losses = append(losses, m["loss/value"])
	}
	t.Logf("value loss per epoch: %v", losses)
	if len(losses) != 6 || !(losses[5] < 0.5*losses[0]) {
		t.Errorf("value loss %v: want it to fall below half its first value over 6 epochs", losses)
	}
	sv, _, err := safetensors.ReadFile(filepath.Join(c.OutputDir, trainable.ValueDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	rv, _, err := safetensors.ReadFile(filepath.Join(rm, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	a, _ := sv[decoder.ScoreWeight].Float32s()
	b, _ := rv[decoder.ScoreWeight].Float32s()
	if len(a) == 0 || slices.Equal(a, b) {
		t.Errorf("the value model's score head did not change (%d values)", len(a))
	}
}

// Under bf16 the value model gets float32 masters beside the policy's: the run trains and its
// resume is bit-exact too.
func TestPPO_BF16ResumeExact(t *testing.T) {
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 3)
	resumeCheck(t, func() *Config {
		c := tinyConfig(t, policy, rm)
		c.BF16, c.NumPPOEpochs, c.NumMiniBatches = true, 1, 1
		return c
	}, 2)
}

// Evaluation on the driver's cadence: eval_objective/scores (the reward model's mean score of the
// eval prompts' near-greedy responses) at every eval_steps update, the same numbers in a resumed
// run; a run without eval_strategy does not evaluate.
func TestPPO_Evaluate(t *testing.T) {
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 3)
	evalFile := looptest.MultFile(t, mult.GRPO, 3, 1)
	newConfig := func() *Config {
		c := tinyConfig(t, policy, rm)
		c.NumPPOEpochs, c.NumMiniBatches = 1, 1
		c.EvalDataset, c.EvalStrategy, c.EvalSteps, c.PerDeviceEvalBatchSize = evalFile, "steps", 1, 2
		return c
	}
	c := newConfig()
	if _, err := run(t, c, 0); err != nil {
		t.Fatal(err)
	}
	var evals int
	b, err := os.ReadFile(filepath.Join(c.OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.Contains(line, `"eval_objective/scores"`) && strings.Contains(line, `"eval_val/num_eos_tokens"`) {
			evals++
		}
	}
	if evals != 2 {
		t.Errorf("%d eval lines in metrics.jsonl, want 2 (eval_steps 1, 2 updates):\n%s", evals, b)
	}
	resumeCheck(t, newConfig, 2)
}

// A reward model of another tokenizer (here: two tokens' ids swapped) is refused before training,
// naming both checkpoints and the token id.
func TestPPO_RefusesOtherVocabulary(t *testing.T) {
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 3)
	path := filepath.Join(rm, "tokenizer.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	if err := json.Unmarshal(raw, &tok); err != nil {
		t.Fatal(err)
	}
	vocab := tok["model"].(map[string]any)["vocab"].(map[string]any)
	vocab["a"], vocab["b"] = vocab["b"], vocab["a"]
	if raw, err = json.Marshal(tok); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	c := tinyConfig(t, policy, rm)
	_, err = Load(stdctx.Background(), c, policy, RunOptions{Env: loop.Env{Backend: looptest.Backend(t)}, Rows: tinyRows()})
	if err == nil || !strings.Contains(err.Error(), rm) || !strings.Contains(err.Error(), policy) || !strings.Contains(err.Error(), "token id") {
		t.Errorf("a reward model of another vocabulary: %v, want an error naming both and the token id", err)
	}
	t.Log(err)
}
