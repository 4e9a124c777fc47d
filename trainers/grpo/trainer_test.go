package grpo

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// The tests run GRPO on a tiny random Qwen2 (vocabulary of 16 "letters" a..p, id 0 = 'a' is the
// end-of-sequence token) with rewards over the decoded letters.

const tinyVocab = 16

// letters decodes id i as the letter 'a'+i; the EOS id 0 is special and skipped.
type letters struct{}

func (letters) Decode(ids []int, skipSpecial bool) string {
	var b strings.Builder
	for _, id := range ids {
		if id == 0 && skipSpecial {
			continue
		}
		b.WriteByte(byte('a' + id))
	}
	return b.String()
}

// testBackend is the backend of every test here (backend.ForTests), one per test binary.
var testBackend = sync.OnceValue(backend.MustNewForTests)

func tinyModel(t *testing.T, seed uint64) *trainable.Model {
	t.Helper()
	cfg, err := decoder.ParseConfig([]byte(`{"model_type":"qwen2","vocab_size":16,"hidden_size":16,"intermediate_size":32,
		"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"rms_norm_eps":1e-6,"rope_theta":10000,
		"tie_word_embeddings":true,"max_position_embeddings":64,"initializer_range":0.1,"eos_token_id":0}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	if err := decoder.InitWeights(ctx, cfg, seed, dtypes.Float32); err != nil {
		t.Fatal(err)
	}
	return &trainable.Model{Config: cfg, Ctx: ctx, DType: dtypes.Float32}
}

// tinyConfig is a small on-policy run: 4 prompts × 4 generations per step. Gradient
// checkpointing is off, for time (on XLA its graphs take longer to compile): the checkpointed
// gradients are models/decoder's TestCheckpointLayers_SameGradients, and GRPO's checkpointed run
// (TRL's default) is TestGRPO_ResumeEqualsStraight, resumed exactly.
func tinyConfig(t *testing.T) *Config {
	c := DefaultConfig()
	c.GradientCheckpointing = false
	c.Model, c.Dataset, c.OutputDir = "tiny", "tiny", t.TempDir()
	c.RewardFuncs = []string{"test"}
	c.NumGenerations, c.PerDeviceTrainBatchSize = 4, 16
	c.MaxCompletionLength, c.MaxSteps, c.LoggingSteps = 6, 1, 1
	c.LearningRate, c.WarmupRatio, c.LRSchedulerType = 0.03, 0, "constant"
	c.Seed = 7
	return c
}

func tinyPrompts() []*Prompt {
	return []*Prompt{
		{Text: "bcd", IDs: []int32{1, 2, 3}},
		{Text: "ef", IDs: []int32{4, 5}},
		{Text: "ghij", IDs: []int32{6, 7, 8, 9}},
		{Text: "k", IDs: []int32{10}},
	}
}

// countReward rewards the share of letter c in a completion (0 for an empty one).
func countReward(c byte) Reward {
	return Reward{Name: "test", Weight: 1, Func: func(_, completions []string, _ map[string][]any) ([]float64, error) {
		out := make([]float64, len(completions))
		for i, s := range completions {
			if len(s) > 0 {
				out[i] = float64(strings.Count(s, string(c))) / float64(len(s))
			}
		}
		return out, nil
	}}
}

func constReward(v float64) Reward {
	return Reward{Name: "test", Weight: 1, Func: func(_, completions []string, _ map[string][]any) ([]float64, error) {
		out := make([]float64, len(completions))
		for i := range out {
			out[i] = v
		}
		return out, nil
	}}
}

// trainRun trains and returns every step's info.
func trainRun(t *testing.T, c *Config, rw Reward, logger *slog.Logger) []StepInfo {
	t.Helper()
	c.Resolve()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var infos []StepInfo
	tr, err := New(Setup{Config: c, Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{rw}, Logger: logger,
		OnStep: func(s StepInfo) { infos = append(infos, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if len(infos) != c.MaxSteps {
		t.Fatalf("%d steps reported, want %d", len(infos), c.MaxSteps)
	}
	return infos
}

// TRL #2995: with β = 0 and one update per generation batch the ratio is exactly 1, so the GRPO
// loss is −mean(A) = 0 (advantages are centred per group), yet its gradient Σ A·∇log π is not.
// The sampler's log-probs equal the trainer's (same temperature, same weights).
func TestGRPO_OnPolicyLossIsZeroGradientIsNot(t *testing.T) {
	c := tinyConfig(t)
	c.LossType, c.Temperature = "grpo", 0.7
	s := trainRun(t, c, countReward('c'), nil)[0]
	if math.Abs(s.Loss) > 1e-6 {
		t.Errorf("loss = %g, want 0 (ratio 1, centred advantages)", s.Loss)
	}
	if !(s.GradNorm > 1e-4) {
		t.Errorf("grad norm = %g, want > 0", s.GradNorm)
	}
	if f := s.Metrics["sampling/ratio_outside_0.9_1.1"]; f != 0 {
		t.Errorf("float32: %g of the tokens have a sampling/training ratio outside [0.9, 1.1], want none", f)
	}
	if d := s.Metrics["sampling/sampling_logp_difference/max"]; !(d < 1e-4) {
		t.Errorf("max |sampling − training log-prob| = %g, want < 1e-4 (both at T = 0.7)", d)
	}
	if r := s.Metrics["clip_ratio/region_mean"]; r != 0 {
		t.Errorf("clip_ratio/region_mean = %g, want 0 on-policy", r)
	}
}

// A reward for the share of letter 'c' raises its frequency in the samples within a few steps.
func TestGRPO_RewardedTokenGetsMoreFrequent(t *testing.T) {
	c := tinyConfig(t)
	c.MaxSteps, c.LoggingSteps = 12, 4
	infos := trainRun(t, c, countReward('c'), nil)
	freq := func(ss []StepInfo) float64 {
		n, k := 0, 0
		for _, s := range ss {
			for _, txt := range s.Scored.Texts {
				n += len(txt)
				k += strings.Count(txt, "c")
			}
		}
		return float64(k) / float64(max(n, 1))
	}
	before, after := freq(infos[:2]), freq(infos[len(infos)-2:])
	t.Logf("frequency of 'c': %.3f in the first two steps, %.3f in the last two", before, after)
	if !(after > before+0.2) {
		t.Errorf("frequency of 'c' went from %.3f to %.3f, want a rise of more than 0.2", before, after)
	}
}

// Groups whose completions all get the same reward have zero advantages and contribute no
// gradient; when every group is like that the step's gradient is exactly 0, frac_reward_zero_std
// is 1, and the guard rail warns after GuardLogs logging steps.
func TestGRPO_ZeroStdGroupsGiveNoGradient(t *testing.T) {
	c := tinyConfig(t)
	c.MaxSteps, c.LoggingSteps = GuardLogs, 1
	var logBuf bytes.Buffer
	infos := trainRun(t, c, constReward(1), slog.New(slog.NewTextHandler(&logBuf, nil)))
	for _, s := range infos {
		if s.GradNorm != 0 || s.Loss != 0 {
			t.Errorf("step %d: loss %g, grad norm %g; want both 0", s.Step, s.Loss, s.GradNorm)
		}
	}
	if !strings.Contains(logBuf.String(), "frac_reward_zero_std") {
		t.Errorf("no guard-rail warning about frac_reward_zero_std in the log:\n%s", logBuf.String())
	}
	last := lastMetrics(t, c.OutputDir)
	if last["frac_reward_zero_std"] != 1.0 {
		t.Errorf("frac_reward_zero_std = %v, want 1", last["frac_reward_zero_std"])
	}
}

// A group with equal rewards adds nothing to the gradient of a mixed batch: the gradient norm of
// a batch whose second group is constant equals that of the same batch with that group's
// advantages zeroed by hand (both use the same samples: same seed).
func TestGRPO_ZeroStdGroupAddsNothing(t *testing.T) {
	half := func(zeroSecond bool) float64 {
		c := tinyConfig(t)
		c.LossType = "grpo"
		rw := countReward('c')
		inner := rw.Func
		rw.Func = func(p, comps []string, cols map[string][]any) ([]float64, error) {
			out, err := inner(p, comps, cols)
			if zeroSecond {
				for i := 4; i < 8; i++ { // the second group
					out[i] = 0.5
				}
			}
			return out, err
		}
		return trainRun(t, c, rw, nil)[0].GradNorm
	}
	mixed := half(true)
	if !(mixed > 0) {
		t.Fatalf("grad norm %g with one informative group, want > 0", mixed)
	}
	c := tinyConfig(t)
	c.LossType = "grpo"
	tr := newTiny(t, c, countReward('c'))
	r, _, err := tr.rollout()
	if err != nil {
		t.Fatal(err)
	}
	for i := 4; i < 8; i++ { // the second group
		r.Advantages[i] = 0
	}
	gradNorm := stepOn(t, tr, r)
	if math.Abs(gradNorm-mixed) > 1e-5*mixed {
		t.Errorf("grad norm %g with the constant group, %g with its advantages zeroed; want equal", mixed, gradNorm)
	}
}

func resolved(t *testing.T, c *Config) *Config {
	c.Resolve()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// firstLetter rewards the alphabet position of a completion's first letter (graded, so groups
// rarely tie).
func firstLetter() Reward {
	return Reward{Name: "test", Weight: 1, Func: func(_, completions []string, _ map[string][]any) ([]float64, error) {
		out := make([]float64, len(completions))
		for i, s := range completions {
			if len(s) > 0 {
				out[i] = float64(s[0]-'a') / tinyVocab
			}
		}
		return out, nil
	}}
}

// stepOn runs the first optimizer step of tr on rollout r (its first step_batch rows) with an
// optimizer of its own, as the driver runs a step, and returns the gradient norm.
func stepOn(t *testing.T, tr *Trainer, r *Scored) float64 {
	t.Helper()
	c := tr.cfg
	opt, err := loop.NewOptimizer(tr.s.Backend, tr.s.Model, loop.OptimizerConfig{Beta1: c.AdamBeta1, Beta2: c.AdamBeta2,
		Epsilon: c.AdamEpsilon, WeightDecay: c.WeightDecay, MaxGradNorm: c.MaxGradNorm}, source{tr}.Loss)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	if _, err := tr.accumulate(opt, r, 0); err != nil {
		t.Fatal(err)
	}
	gradNorm, err := opt.Apply(c.LearningRate)
	if err != nil {
		t.Fatal(err)
	}
	return gradNorm
}

// newTiny builds a trainer on the tiny model without running it.
func newTiny(t *testing.T, c *Config, rw Reward) *Trainer {
	t.Helper()
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{rw}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// With mask_truncated_completions, completions cut at max_completion_length (no EOS) get an
// all-zero mask and leave the loss: the gradient equals that of the unmasked run on the same
// samples with the truncated completions' advantages set to 0 (loss_type grpo weighs every
// sequence 1/B either way).
func TestGRPO_MaskTruncatedCompletions(t *testing.T) {
	step := func(mask bool) (float64, *Scored) {
		c := tinyConfig(t)
		c.MaxCompletionLength, c.MaskTruncatedCompletions, c.LossType = 2, mask, "grpo"
		tr := newTiny(t, c, firstLetter())
		r, _, err := tr.rollout()
		if err != nil {
			t.Fatal(err)
		}
		if !mask {
			for i, cut := range r.Truncated {
				if cut {
					r.Advantages[i] = 0
				}
			}
		}
		return stepOn(t, tr, r), r
	}
	masked, r := step(true)
	cut := 0
	for i, tr := range r.Truncated {
		ended := r.Completions[i][len(r.Completions[i])-1] == 0
		if tr == ended {
			t.Errorf("completion %d %v: truncated = %v", i, r.Completions[i], tr)
		}
		for _, m := range r.Mask[i] {
			if tr && m != 0 || !tr && m != 1 {
				t.Errorf("completion %d (truncated %v) has mask %v", i, tr, r.Mask[i])
				break
			}
		}
		if tr {
			cut++
		}
	}
	if cut == 0 || cut == r.Len() {
		t.Fatalf("%d of %d completions truncated: the test needs both kinds (change the seed)", cut, r.Len())
	}
	zeroed, _ := step(false)
	if !(masked > 0) || math.Abs(masked-zeroed) > 1e-5*zeroed {
		t.Errorf("grad norm %g with truncated completions masked, %g with their advantages zeroed; want equal and > 0", masked, zeroed)
	}
}

// Off-policy (num_iterations 2): the old log-probs are recomputed after generation, the first
// update has ratio 1, the second sees the moved policy; β > 0 loads the frozen reference, whose
// KL is 0 at the first step and positive after an update.
func TestGRPO_OffPolicyAndReference(t *testing.T) {
	c := tinyConfig(t)
	c.NumIterations, c.MaxSteps, c.Beta, c.Epsilon = 2, 2, 0.1, 0.01
	if !OffPolicy(resolved(t, c)) {
		t.Fatal("num_iterations 2 must be off-policy")
	}
	infos := trainRun(t, c, countReward('c'), nil)
	if infos[0].Scored != infos[1].Scored {
		t.Error("the two iterations must reuse one generation batch")
	}
	if kl := infos[0].Metrics["kl"]; math.Abs(kl) > 1e-7 {
		t.Errorf("kl at step 1 = %g, want 0 (policy = reference)", kl)
	}
	if kl := infos[1].Metrics["kl"]; !(kl > 0) {
		t.Errorf("kl at step 2 = %g, want > 0", kl)
	}
	if r := infos[0].Metrics["clip_ratio/region_mean"]; r != 0 {
		t.Errorf("clip ratio at the first iteration = %g, want 0", r)
	}
	m := infos[1].Metrics
	if r := m["clip_ratio/region_mean"]; !(r > 0) {
		t.Errorf("clip ratio at the second iteration = %g, want > 0 with ε = 0.01 and lr 0.03", r)
	}
	// One process: TRL's min/max over processes are the process's own values.
	if m["clip_ratio/low_min"] != m["clip_ratio/low_mean"] || m["clip_ratio/high_max"] != m["clip_ratio/high_mean"] {
		t.Errorf("low_min %g / low_mean %g, high_max %g / high_mean %g: want equal with one process",
			m["clip_ratio/low_min"], m["clip_ratio/low_mean"], m["clip_ratio/high_max"], m["clip_ratio/high_mean"])
	}
	if got := m["clip_ratio/low_mean"] + m["clip_ratio/high_mean"]; math.Abs(got-m["clip_ratio/region_mean"]) > 1e-12 {
		t.Errorf("low_mean + high_mean = %g, want region_mean %g (disjoint: A < 0 vs A > 0)", got, m["clip_ratio/region_mean"])
	}
}

// metrics.jsonl carries TRL's names; completions.jsonl the sampled completions.
func TestGRPO_MetricsAndCompletionFiles(t *testing.T) {
	c := tinyConfig(t)
	c.MaxSteps, c.LoggingSteps = 2, 1
	trainRun(t, c, countReward('c'), nil)
	last := lastMetrics(t, c.OutputDir)
	for _, k := range []string{"loss", "grad_norm", "learning_rate", "reward", "reward_std", "rewards/test/mean",
		"rewards/test/std", "frac_reward_zero_std", "completions/mean_length", "completions/min_length",
		"completions/max_length", "completions/clipped_ratio", "completions/mean_terminated_length", "entropy",
		"clip_ratio/low_mean", "clip_ratio/low_min", "clip_ratio/high_mean", "clip_ratio/high_max",
		"clip_ratio/region_mean", "num_tokens",
		"sampling/sampling_logp_difference/mean", "sampling/sampling_logp_difference/max", "sampling/ratio_outside_0.9_1.1",
		"timing_s/generation", "timing_s/scoring", "timing_s/rewards", "timing_s/update", "tokens_per_s/generation"} {
		if _, ok := last[k]; !ok {
			t.Errorf("metrics.jsonl lacks %q", k)
		}
	}
	if _, ok := last["kl"]; ok {
		t.Error("kl is logged with β = 0")
	}
	data, err := os.ReadFile(filepath.Join(c.OutputDir, "completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 2*16 {
		t.Errorf("completions.jsonl has %d lines, want 32 (16 per logging step)", n)
	}
}

func lastMetrics(t *testing.T, dir string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Every completion cut at max_completion_length (no stop token can end it) sets
// completions/clipped_ratio to 1, and the guard rail warns after GuardLogs logging steps.
func TestGRPO_ClippedRatioGuardRail(t *testing.T) {
	c := tinyConfig(t)
	c.MaxSteps, c.LoggingSteps, c.MaxCompletionLength = GuardLogs, 1, 2
	var logBuf bytes.Buffer
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: letters{}, StopIDs: []int{tinyVocab + 1}, Prompts: tinyPrompts(), Rewards: []Reward{firstLetter()},
		Logger: slog.New(slog.NewTextHandler(&logBuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if got := lastMetrics(t, c.OutputDir)["completions/clipped_ratio"]; got != 1.0 {
		t.Errorf("completions/clipped_ratio = %v, want 1", got)
	}
	if !strings.Contains(logBuf.String(), "completions/clipped_ratio") {
		t.Errorf("no guard-rail warning about completions/clipped_ratio:\n%s", logBuf.String())
	}
}

// --bf16: rollouts, scoring and the loss run on bfloat16 weights while AdamW updates float32
// masters; the rewarded token still gets more frequent, the sampler's and the trainer's
// log-probs agree to bf16 precision, and the weights stay bf16 with float32 masters.
func TestGRPO_BF16(t *testing.T) {
	c := tinyConfig(t)
	c.MaxSteps, c.LoggingSteps, c.BF16, c.Beta = 12, 4, true, 0.04
	c.Resolve()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	m := tinyModel(t, 3)
	if err := m.ToBF16(); err != nil {
		t.Fatal(err)
	}
	var infos []StepInfo
	tr, err := New(Setup{Config: c, Backend: testBackend(), Model: m,
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{countReward('c')},
		OnStep: func(s StepInfo) { infos = append(infos, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	vars, _, err := m.Params()
	if err != nil {
		t.Fatal(err)
	}
	if vars[0].DType() != dtypes.BFloat16 || m.Master(vars[0]).DType() != dtypes.Float32 {
		t.Errorf("after training: weight %s, master %s; want bfloat16 and float32", vars[0].DType(), m.Master(vars[0]).DType())
	}
	count := func(ss []StepInfo) float64 {
		n, k := 0, 0
		for _, s := range ss {
			for _, txt := range s.Scored.Texts {
				n, k = n+len(txt), k+strings.Count(txt, "c")
			}
		}
		return float64(k) / float64(max(n, 1))
	}
	before, after := count(infos[:2]), count(infos[len(infos)-2:])
	t.Logf("bf16: frequency of 'c' %.3f → %.3f; sampling logp difference max %g", before, after,
		infos[0].Metrics["sampling/sampling_logp_difference/max"])
	if !(after > before+0.2) {
		t.Errorf("bf16: frequency of 'c' went from %.3f to %.3f, want a rise of more than 0.2", before, after)
	}
	if d := infos[0].Metrics["sampling/sampling_logp_difference/max"]; !(d < 0.05) {
		t.Errorf("bf16: max |sampling − training log-prob| = %g, want < 0.05", d)
	}
	// The same first rollout in float32: its log-probs differ by bf16 rounding, so bf16 ran.
	f32 := tinyConfig(t)
	f32Step := trainRun(t, f32, countReward('c'), nil)[0].Scored
	diff := 0.0
	for i, lps := range infos[0].Scored.SampledLogp {
		for j := range min(len(lps), len(f32Step.SampledLogp[i])) {
			diff = max(diff, math.Abs(lps[j]-f32Step.SampledLogp[i][j]))
		}
	}
	if !(diff > 1e-4) {
		t.Errorf("bf16 and float32 rollouts' log-probs differ by at most %g: bf16 compute did not run", diff)
	}
}

// An epoch of num_train_epochs and of the logged epoch holds every prompt's num_generations
// completions num_iterations times, as the length of TRL's RepeatSampler: with num_iterations 2
// a run of one epoch has twice the optimizer steps, and each step is half as much of an epoch.
func TestTrainer_EpochCountsIterations(t *testing.T) {
	for _, mu := range []int{1, 2} {
		c := tinyConfig(t)
		c.MaxSteps, c.NumTrainEpochs, c.NumIterations = 0, 1, mu
		c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps = 4, 2 // 8 completions a step, 16 an epoch pass
		c.Resolve()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		tr, err := New(Setup{Config: c, Backend: testBackend(), Model: tinyModel(t, 3), Decoder: letters{}, StopIDs: []int{0},
			Prompts: tinyPrompts(), Rewards: []Reward{countReward('b')}})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := tr.TotalSteps(), 2*mu; got != want {
			t.Errorf("num_iterations %d: %d steps in one epoch, want %d", mu, got, want)
		}
		if got, want := tr.epochAt(1), 0.5/float64(mu); got != want {
			t.Errorf("num_iterations %d: epoch %g after one step, want %g", mu, got, want)
		}
	}
}
