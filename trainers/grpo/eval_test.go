package grpo

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
)

func evalPrompts() []*Prompt {
	return []*Prompt{
		{Text: "lmn", IDs: []int32{11, 12, 13}},
		{Text: "op", IDs: []int32{14, 15}},
		{Text: "cb", IDs: []int32{2, 1}},
		{Text: "fedcba", IDs: []int32{5, 4, 3, 2, 1, 6, 7, 8, 9, 10}}, // longer than any training prompt
	}
}

// evalRun trains the tiny model with the random reward (so that a stray reward call would change
// the training rewards) and returns the final weights, the step infos and the metrics lines.
func evalRun(t *testing.T, c *Config, eval []*Prompt) (map[string][]float32, []StepInfo, []runlog.Record) {
	t.Helper()
	var infos []StepInfo
	first := firstLetter()
	first.Name = "first"
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), EvalPrompts: eval,
		Rewards: []Reward{func() Reward { r := randomReward(); r.Name = "test"; return r }(), first},
		OnStep:  func(s StepInfo) { infos = append(infos, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := runlog.ReadMetrics(c.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	return modelWeights(t, tr), infos, recs
}

func evalConfig(t *testing.T) *Config {
	c := tinyConfig(t)
	c.PerDeviceTrainBatchSize, c.MaxSteps, c.Beta = 8, 3, 0.04
	return c
}

// Evaluating (on start and every 2 steps, with its own sampler streams, reward calls and a longer
// prompt layout) leaves the training trajectory bit for bit as it is without evaluation: the same
// weights, losses and rewards at every step. TRL's evaluation draws from the global torch RNG and
// so shifts the training samples; posttrain does not.
func TestGRPO_EvalDoesNotChangeTraining(t *testing.T) {
	plain := evalConfig(t)
	wantW, wantInfos, wantRecs := evalRun(t, plain, nil)

	c := evalConfig(t)
	c.EvalDataset, c.EvalStrategy, c.EvalSteps, c.EvalOnStart, c.PerDeviceEvalBatchSize = "tiny-eval", "steps", 2, true, 8
	gotW, gotInfos, recs := evalRun(t, c, evalPrompts())

	if d := maxAbsDiff(gotW, wantW); d != 0 {
		t.Errorf("weights differ by %g with evaluation", d)
	}
	for i := range wantInfos {
		if gotInfos[i].Loss != wantInfos[i].Loss || gotInfos[i].GradNorm != wantInfos[i].GradNorm ||
			!slices.Equal(gotInfos[i].Scored.Rewards, wantInfos[i].Scored.Rewards) {
			t.Errorf("step %d: loss %g grad %g rewards %v with eval, want %g %g %v", i+1, gotInfos[i].Loss, gotInfos[i].GradNorm,
				gotInfos[i].Scored.Rewards, wantInfos[i].Loss, wantInfos[i].GradNorm, wantInfos[i].Scored.Rewards)
		}
	}
	var evalSteps []int
	var train []runlog.Record
	for _, r := range recs {
		if _, ok := r.Metrics["eval_loss"]; ok {
			evalSteps = append(evalSteps, r.Step)
			continue
		}
		train = append(train, r)
		for k := range r.Metrics {
			if strings.HasPrefix(k, "eval_") {
				t.Errorf("training line at step %d has %s", r.Step, k)
			}
		}
	}
	if !slices.Equal(evalSteps, []int{0, 2}) {
		t.Errorf("eval lines at steps %v, want 0 (eval_on_start) and 2", evalSteps)
	}
	if len(train) != len(wantRecs) {
		t.Fatalf("%d training lines with eval, %d without", len(train), len(wantRecs))
	}
	for i, r := range train {
		for k, v := range wantRecs[i].Metrics {
			if !strings.HasPrefix(k, "timing_s/") && !strings.HasPrefix(k, "tokens_per_s/") && r.Metrics[k] != v {
				t.Errorf("step %d %s = %g with eval, want %g", r.Step, k, r.Metrics[k], v)
			}
		}
	}
}

// An eval line carries TRL's eval-mode metrics under "eval_" names, and eval_reward is the mean
// reward of the completions in eval_completions.jsonl (all prompts × num_generations of them,
// in equal batches here, so the mean of the batch means is the overall mean).
func TestGRPO_EvalMetricsMatchEvalCompletions(t *testing.T) {
	c := evalConfig(t)
	c.MaxSteps, c.EvalDataset, c.EvalStrategy, c.PerDeviceEvalBatchSize = 4, "tiny-eval", "epoch", 8
	_, _, recs := evalRun(t, c, evalPrompts())
	evals := map[int]runlog.Record{}
	for _, r := range recs {
		if _, ok := r.Metrics["eval_loss"]; ok {
			evals[r.Step] = r
		}
	}
	// 4 prompts × 4 generations = 16 completions per epoch, 8 per step: epochs end at steps 2, 4.
	if len(evals) != 2 || evals[2].Step != 2 || evals[4].Step != 4 || evals[2].Epoch != 1 || evals[4].Epoch != 2 {
		t.Fatalf("eval lines %v, want steps 2 and 4 at epochs 1 and 2", evals)
	}
	for _, k := range []string{"eval_reward", "eval_reward_std", "eval_frac_reward_zero_std", "eval_rewards/test/mean",
		"eval_rewards/first/std", "eval_completions/mean_length", "eval_completions/clipped_ratio", "eval_kl", "eval_entropy",
		"eval_clip_ratio/region_mean", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second"} {
		if _, ok := evals[2].Metrics[k]; !ok {
			t.Errorf("eval line lacks %s: %v", k, evals[2].Metrics)
		}
	}
	if _, ok := evals[2].Metrics["eval_num_tokens"]; ok {
		t.Error("eval line has eval_num_tokens; TRL counts tokens in train mode only")
	}
	f, err := os.Open(filepath.Join(c.OutputDir, EvalCompletionsName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums, counts, prompts := map[int]float64{}, map[int]int{}, map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var line struct {
			Step    int
			Prompt  string
			Rewards map[string]float64
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		sums[line.Step] += line.Rewards["test"] + line.Rewards["first"]
		counts[line.Step]++
		prompts[line.Prompt]++
	}
	for _, s := range []int{2, 4} {
		if counts[s] != 16 {
			t.Errorf("step %d: %d eval completions, want 16", s, counts[s])
		}
		if got, want := evals[s].Metrics["eval_reward"], sums[s]/float64(counts[s]); math.Abs(got-want) > 1e-12 {
			t.Errorf("step %d: eval_reward %g, mean of eval_completions.jsonl %g", s, got, want)
		}
	}
	for _, p := range evalPrompts() {
		if prompts[p.Text] != 8 {
			t.Errorf("prompt %q: %d eval completions over 2 evaluations, want 4 each", p.Text, prompts[p.Text])
		}
	}
}

// An eval batch size that splits a group is refused when the trainer is built.
func TestGRPO_EvalBatchMustHoldWholeGroups(t *testing.T) {
	c := evalConfig(t)
	c.EvalDataset, c.EvalOnStart, c.PerDeviceEvalBatchSize = "e", true, 6
	c.Resolve()
	_, err := New(Setup{Config: c, Backend: testBackend(), Model: tinyModel(t, 3), Decoder: letters{},
		StopIDs: []int{0}, Prompts: tinyPrompts(), EvalPrompts: evalPrompts(), Rewards: []Reward{firstLetter()}})
	if err == nil || !strings.Contains(err.Error(), "per_device_eval_batch_size") {
		t.Errorf("got %v, want an error naming per_device_eval_batch_size", err)
	}
}
