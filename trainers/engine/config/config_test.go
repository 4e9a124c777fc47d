package config_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/trainers"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/reward"
	"github.com/posttrain/posttrain/trainers/sft"
)

// TRL v0.24 defaults (trl/trainer/*_config.py, HF TrainingArguments), by YAML key.
func TestDefaults_MatchTRL(t *testing.T) {
	common := map[string]any{
		"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1, "num_train_epochs": 3.0,
		"max_steps": -1, "warmup_ratio": 0.0, "warmup_steps": 0, "lr_scheduler_type": "linear",
		"max_grad_norm": 1.0, "weight_decay": 0.0, "adam_beta1": 0.9, "adam_beta2": 0.999,
		"adam_epsilon": 1e-8, "seed": 42, "logging_steps": 10, "save_steps": 500, "save_total_limit": 0,
		"bf16": false, "eval_dataset": "", "eval_strategy": "no", "eval_steps": 0, "per_device_eval_batch_size": 8,
		"eval_on_start": false, "report_to": []string{"none"},
	}
	methods := map[string]map[string]any{
		"sft": {"learning_rate": 2e-5, "max_length": 1024, "completion_only_loss": (*bool)(nil), "assistant_only_loss": (*bool)(nil),
			"packing": false, "packing_strategy": "bfd", "padding_free": false, "loss_type": "nll",
			"dataset_text_field": "text", "eos_token": "", "chat_template_path": ""},
		"dpo": {"learning_rate": 1e-6, "beta": 0.1, "loss_type": []string{"sigmoid"}, "loss_weights": []float64(nil),
			"label_smoothing": 0.0, "discopop_tau": 0.05, "rpo_alpha": 0.0,
			"reference_free": false, "f_divergence_type": "reverse_kl", "f_alpha_divergence_coef": 1.0, "ld_alpha": 0.0, "use_weighting": false,
			"max_length": 1024, "max_prompt_length": 512, "max_completion_length": 0, "truncation_mode": "keep_end",
			"precompute_ref_log_probs": false, "disable_dropout": true},
		"kto": {"learning_rate": 1e-6, "beta": 0.1, "loss_type": "kto", "desirable_weight": 1.0, "undesirable_weight": 1.0,
			"max_length": 1024, "max_prompt_length": 512, "max_completion_length": 0, "truncation_mode": "keep_end", "disable_dropout": true},
		"grpo": {"learning_rate": 1e-6, "num_generations": 8, "max_prompt_length": 512, "max_completion_length": 256,
			"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "beta": 0.0, "epsilon": 0.2, "epsilon_high": 0.0, "delta": 0.0,
			"loss_type": "dapo", "scale_rewards": "group", "importance_sampling_level": "token",
			"num_iterations": 1, "steps_per_generation": 0, "mask_truncated_completions": false, "top_entropy_quantile": 1.0,
			"log_completions": false, "reward_weights": []float64(nil),
			"sync_ref_model": false, "ref_model_mixup_alpha": 0.6, "ref_model_sync_steps": 512, "disable_dropout": false},
	}
	// TRL v0.24 turns gradient_checkpointing on in each of these configs (HF's default, off, is PPO's).
	for _, want := range methods {
		want["gradient_checkpointing"] = true
	}
	ppo, err := trainers.New("ppo")
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := config.Lookup(ppo, "gradient_checkpointing"); !ok || f.Value.Bool() {
		t.Errorf("ppo: gradient_checkpointing is on or missing (%v), want HF's default, off", ok)
	}
	for method, want := range methods {
		cfg, err := trainers.New(method)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range common {
			want[k] = v
		}
		for key, w := range want {
			f, ok := config.Lookup(cfg, key)
			if !ok {
				t.Errorf("%s: no option %q", method, key)
				continue
			}
			if got := f.Value.Interface(); !reflect.DeepEqual(got, w) {
				t.Errorf("%s: %s = %#v, want %#v", method, key, got, w)
			}
		}
	}
}

func TestGRPOResolve_TRLPostInit(t *testing.T) {
	c := grpo.DefaultConfig()
	c.GradientAccumulationSteps = 4
	c.Resolve()
	if c.EpsilonHigh != 0.2 || c.StepsPerGeneration != 4 {
		t.Errorf("got epsilon_high %g, steps_per_generation %d; want 0.2, 4", c.EpsilonHigh, c.StepsPerGeneration)
	}
	c = grpo.DefaultConfig()
	c.EpsilonHigh, c.StepsPerGeneration = 0.28, 2
	c.Resolve()
	if c.EpsilonHigh != 0.28 || c.StepsPerGeneration != 2 {
		t.Errorf("explicit values changed: %g, %d", c.EpsilonHigh, c.StepsPerGeneration)
	}
	for in, want := range map[string]string{"true": "group", "False": "none", "batch": "batch"} {
		c.ScaleRewards = in
		c.Resolve()
		if c.ScaleRewards != want {
			t.Errorf("scale_rewards %s resolved to %s, want %s", in, c.ScaleRewards, want)
		}
	}
}

var kebab = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

var snake = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Every option's flag is kebab-case, with its TRL key (snake_case) as an alias where the two differ
// (learning-rate / learning_rate, model / model_name_or_path), and the key's dashed form where
// the flag renames it (model-name-or-path); no name repeats.
func TestFlags_KebabCaseAndUnique(t *testing.T) {
	for _, m := range []string{"sft", "dpo", "kto", "grpo", "reward", "ppo"} {
		cfg, _ := trainers.New(m)
		seen := map[string]bool{}
		for _, f := range config.Flags(cfg) {
			for i, name := range f.Names() {
				if (i == 0 && !kebab.MatchString(name)) || (i == 1 && !snake.MatchString(name)) || (i == 2 && !kebab.MatchString(name)) || i > 2 || seen[name] {
					t.Errorf("%s: bad or repeated flag %q (names %v)", m, name, f.Names())
				}
				seen[name] = true
			}
		}
		for _, want := range []string{"learning_rate", "model_name_or_path", "dataset_name", "per_device_train_batch_size", "model-name-or-path", "dataset-name"} {
			if !seen[want] {
				t.Errorf("%s: no TRL alias --%s", m, want)
			}
		}
		for _, want := range []string{"learning-rate", "per-device-train-batch-size", "gradient-accumulation-steps",
			"num-train-epochs", "max-steps", "warmup-ratio", "warmup-steps", "lr-scheduler-type", "max-grad-norm",
			"weight-decay", "seed", "logging-steps", "save-steps", "save-total-limit", "bf16", "model", "dataset",
			"output-dir", "resume", "resume-from-checkpoint", "config"} {
			if !seen[want] {
				t.Errorf("%s: missing flag --%s", m, want)
			}
		}
	}
}

// runCmd parses args for method and returns the resolved config or the error.
func runCmd(t *testing.T, method string, args ...string) (config.Config, error) {
	t.Helper()
	return runCmdWith(t, method, nil, args...)
}

// runCmdWith is runCmd calling also(cmd, cfg) after FromCommand.
func runCmdWith(t *testing.T, method string, also func(*cli.Command, config.Config), args ...string) (config.Config, error) {
	t.Helper()
	cfg, _ := trainers.New(method)
	var ferr error
	cmd := &cli.Command{
		Name:  method,
		Flags: config.Flags(cfg),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			ferr = config.FromCommand(cmd, cfg)
			if also != nil {
				also(cmd, cfg)
			}
			return nil
		},
	}
	if err := cmd.Run(context.Background(), append([]string{method}, args...)); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return cfg, ferr
}

var required = []string{"--model", "m", "--dataset", "d.jsonl", "--output-dir", "out"}

func TestFromCommand_FlagsOverrideFileOverrideDefaults(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run.yaml")
	yml := "learning_rate: 3e-4\nbeta: 0.05\nmax_steps: 100\nlr_scheduler_type: cosine\nreward_funcs: [mult_exact, format]\n" +
		"reward_weights: [1, 0.5]\nepsilon_high: null\nmodel_name_or_path: fromfile\n"
	if err := os.WriteFile(file, []byte(yml), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--config", file, "--beta", "0.02", "--gradient-accumulation-steps", "2"}, required...)
	cfg, err := runCmd(t, "grpo", args...)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.(*grpo.Config)
	if c.LearningRate != 3e-4 || c.MaxSteps != 100 || c.LRSchedulerType != "cosine" {
		t.Errorf("file values not applied: lr %g, max_steps %d, sched %s", c.LearningRate, c.MaxSteps, c.LRSchedulerType)
	}
	if c.Beta != 0.02 || c.GradientAccumulationSteps != 2 || c.Model != "m" {
		t.Errorf("flags do not override: beta %g, GA %d, model %q", c.Beta, c.GradientAccumulationSteps, c.Model)
	}
	if c.Seed != 42 || c.NumGenerations != 8 {
		t.Errorf("defaults lost: seed %d, G %d", c.Seed, c.NumGenerations)
	}
	if !reflect.DeepEqual(c.RewardFuncs, []string{"mult_exact", "format"}) || !reflect.DeepEqual(c.RewardWeights, []float64{1, 0.5}) {
		t.Errorf("lists: %v %v", c.RewardFuncs, c.RewardWeights)
	}
	if c.EpsilonHigh != 0.2 || c.StepsPerGeneration != 2 {
		t.Errorf("not resolved: epsilon_high %g, steps_per_generation %d", c.EpsilonHigh, c.StepsPerGeneration)
	}
}

// bf16 left unset is TRL's default on a GPU (on) and posttrain's float32 on a CPU; set by the
// file or a flag, false included, it is kept.
func TestDefaultBF16OnGPU_OnlyWhenUnset(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "run.yaml")
	if err := os.WriteFile(file, []byte("bf16: false\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args     []string
		gpu      bool
		want, on bool
	}{
		{nil, true, true, true},
		{nil, false, false, false},
		{[]string{"--bf16=false"}, true, false, false},
		{[]string{"--config", file}, true, false, false},
		{[]string{"--bf16"}, false, true, false},
	} {
		var given bool
		cfg, err := runCmdWith(t, "sft", func(cmd *cli.Command, cfg config.Config) { given = config.Given(cmd, cfg, "bf16") }, append(c.args, required...)...)
		if err != nil {
			t.Fatal(err)
		}
		on := cfg.Common().DefaultBF16OnGPU(c.gpu, given)
		if cfg.Common().BF16 != c.want || on != c.on {
			t.Errorf("%v on a GPU %v: bf16 %v (defaulted %v), want %v (%v)", c.args, c.gpu, cfg.Common().BF16, on, c.want, c.on)
		}
	}
}

// A TRL command line parses as it is: snake_case flags, --model_name_or_path and --dataset_name.
func TestFromCommand_TRLSpelling(t *testing.T) {
	cfg, err := runCmd(t, "sft", "--model_name_or_path", "Qwen/Qwen2.5-0.5B", "--dataset_name", "d.jsonl", "--learning_rate", "2e-5",
		"--per_device_train_batch_size", "4", "--output_dir", "out", "--gradient_checkpointing=false")
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Common()
	if c.Model != "Qwen/Qwen2.5-0.5B" || c.Dataset != "d.jsonl" || c.LearningRate != 2e-5 || c.PerDeviceTrainBatchSize != 4 ||
		c.OutputDir != "out" || c.GradientCheckpointing {
		t.Errorf("TRL spelling not applied: %+v", c)
	}
}

func TestFromCommand_ListAndPointerFlags(t *testing.T) {
	cfg, err := runCmd(t, "grpo", append([]string{"--reward", "a, b", "--reward-weights", "2,3"}, required...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.(*grpo.Config)
	if !reflect.DeepEqual(c.RewardFuncs, []string{"a", "b"}) || !reflect.DeepEqual(c.RewardWeights, []float64{2, 3}) {
		t.Errorf("got %q %v", c.RewardFuncs, c.RewardWeights)
	}
	cfg, err = runCmd(t, "sft", append([]string{"--completion-only-loss=false"}, required...)...)
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.(*sft.Config).CompletionOnlyLoss; p == nil || *p {
		t.Errorf("completion_only_loss = %v, want explicit false", p)
	}
	cfg, _ = runCmd(t, "sft", required...)
	if p := cfg.(*sft.Config).CompletionOnlyLoss; p != nil {
		t.Errorf("completion_only_loss = %v, want nil (auto)", *p)
	}
	cfg, err = runCmd(t, "sft", append([]string{"--loss-type", "dft"}, required...)...)
	if err != nil || cfg.(*sft.Config).LossType != "dft" {
		t.Errorf("sft --loss-type dft: %v, err %v", cfg, err)
	}
}

func TestLoad_ErrorsNameFileAndLine(t *testing.T) {
	cases := []struct {
		yaml, want string
	}{
		{"learning_rate: 1e-5\nlearning-rate: 2\n", `run.yaml:2: unknown key "learning-rate" for dpo; did you mean "learning_rate"?`},
		{"beta: 0.1\nbetta: 0.2\n", `run.yaml:2: unknown key "betta" for dpo; did you mean "beta"?`},
		{"\n\nnum_generations: 8\n", `run.yaml:3: unknown key "num_generations" for dpo`},
		{"model: Qwen/Qwen2.5-0.5B-Instruct\n", `run.yaml:1: unknown key "model" for dpo; did you mean "model_name_or_path"?`},
		{"beta: lots\n", `run.yaml:1: beta: want a number, got "lots"`},
		{"max_length: 1.5\n", `run.yaml:1: max_length: want an integer, got "1.5"`},
		{"bf16: maybe\n", `run.yaml:1: bf16: want true or false, got "maybe"`},
		{"beta: [1]\n", `run.yaml:1: beta: want a number, got a list`},
		{"beta: 0.1\nbeta: 0.2\n", `run.yaml:2: key "beta" repeats line 1`},
		{"- beta\n", `run.yaml:1: want a mapping`},
		{"beta: [\n", `run.yaml:1: invalid YAML`},
	}
	for _, c := range cases {
		err := config.Load("run.yaml", []byte(c.yaml), dpo.DefaultConfig())
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("yaml %q: got %v, want prefix %q (one line)", c.yaml, err, c.want)
		}
	}
	if err := config.Load("empty.yaml", []byte("# nothing\n"), dpo.DefaultConfig()); err != nil {
		t.Errorf("empty file: %v", err)
	}
}

func TestFromCommand_ValidationNamesOption(t *testing.T) {
	cases := []struct {
		method string
		args   []string
		want   string
	}{
		{"sft", []string{"--learning-rate", "-1"}, "sft: learning_rate (--learning-rate) must be > 0, got -1"},
		{"sft", []string{"--lr-scheduler-type", "poly"}, `lr_scheduler_type (--lr-scheduler-type) must be one of linear, cosine, constant, constant_with_warmup, got "poly"`},
		{"dpo", []string{"--loss-type", "kto_pair"}, `loss_type (--loss-type) must be one of sigmoid, ipo, hinge, robust, exo_pair, nca_pair, sppo_hard, aot, aot_pair, discopop, apo_zero, apo_down, sft, got "kto_pair"`},
		{"dpo", []string{"--loss-type", "sigmoid,sppo,sft"}, `loss_type (--loss-type) must be one of sigmoid, ipo, hinge, robust, exo_pair, nca_pair, sppo_hard, aot, aot_pair, discopop, apo_zero, apo_down, sft, got "sppo"`},
		{"dpo", []string{"--loss-type", "sigmoid,bco_pair,sft"}, "loss_type (--loss-type) bco_pair is not implemented"},
		{"dpo", []string{"--loss-type", "sigmoid,sft", "--loss-weights", "0.8,0.2,1"}, "loss_weights (--loss-weights) has 3 weights for 2 loss types"},
		{"dpo", []string{"--loss-weights", "0.5,1"}, "loss_weights (--loss-weights) has 2 weights for 1 loss types"},
		{"dpo", []string{"--loss-type", "sigmoid,sft", "--loss-weights", "1,NaN"}, "loss_weights (--loss-weights) must be finite, got NaN"},
		{"dpo", []string{"--loss-type", "discopop", "--discopop-tau", "0"}, "discopop_tau (--discopop-tau) must be > 0, got 0"},
		{"dpo", []string{"--label-smoothing", "0.1", "--loss-type", "ipo"}, "label_smoothing (--label-smoothing) applies to loss_type sigmoid, robust, exo_pair, aot and aot_pair only, not ipo"},
		{"dpo", []string{"--label-smoothing", "0.1", "--loss-type", "sigmoid,apo_zero"}, "label_smoothing (--label-smoothing) applies to loss_type sigmoid, robust, exo_pair, aot and aot_pair only, not apo_zero"},
		{"dpo", []string{"--max-prompt-length", "2048"}, "max_prompt_length (--max-prompt-length) (2048) must be < max_length (1024)"},
		{"dpo", []string{"--truncation-mode", "keep_middle"}, `truncation_mode (--truncation-mode) must be one of keep_end, keep_start, got "keep_middle"`},
		{"dpo", []string{"--max-completion-length", "-1"}, "max_completion_length (--max-completion-length) must be ≥ 0 (0 = no limit), got -1"},
		{"dpo", []string{"--rpo-alpha", "-0.5"}, "rpo_alpha (--rpo-alpha) must be ≥ 0 (0 = off), got -0.5"},
		{"dpo", []string{"--rpo-alpha", "+Inf"}, "rpo_alpha (--rpo-alpha) must be ≥ 0 (0 = off), got +Inf"},
		{"dpo", []string{"--ld-alpha", "-0.5"}, "ld_alpha (--ld-alpha) must be ≥ 0 (0 = off), got -0.5"},
		{"dpo", []string{"--f-divergence-type", "kl"}, `f_divergence_type (--f-divergence-type) must be one of reverse_kl, forward_kl, js_divergence, alpha_divergence, got "kl"`},
		{"dpo", []string{"--f-divergence-type", "alpha_divergence", "--f-alpha-divergence-coef", "0"}, "f_alpha_divergence_coef (--f-alpha-divergence-coef) must be finite and ≠ 0 with f_divergence_type alpha_divergence (the logits divide by it), got 0"},
		{"kto", []string{"--loss-type", "apo_zero"}, `loss_type (--loss-type) must be one of kto, apo_zero_unpaired, got "apo_zero"`},
		{"kto", []string{"--desirable-weight", "0"}, "desirable_weight (--desirable-weight) must be > 0"},
		{"kto", []string{"--truncation-mode", "left"}, `truncation_mode (--truncation-mode) must be one of keep_end, keep_start, got "left"`},
		{"kto", []string{"--max-completion-length", "-3"}, "max_completion_length (--max-completion-length) must be ≥ 0 (0 = no limit), got -3"},
		{"grpo", []string{"--num-generations", "1", "--reward", "r"}, "num_generations (--num-generations) must be ≥ 2"},
		{"grpo", []string{"--reward", "a", "--sync-ref-model", "--ref-model-mixup-alpha", "1.5"}, "ref_model_mixup_alpha (--ref-model-mixup-alpha) must be in [0, 1] with sync_ref_model, got 1.5"},
		{"grpo", []string{"--reward", "a", "--sync-ref-model", "--ref-model-mixup-alpha", "NaN"}, "ref_model_mixup_alpha (--ref-model-mixup-alpha) must be in [0, 1] with sync_ref_model, got NaN"},
		{"grpo", []string{"--reward", "a", "--sync-ref-model", "--ref-model-sync-steps", "0"}, "ref_model_sync_steps (--ref-model-sync-steps) must be ≥ 1 with sync_ref_model, got 0"},
		{"grpo", []string{"--num-generations", "3", "--reward", "r"}, "num_generations (--num-generations) (3) must divide the generation batch per_device_train_batch_size × steps_per_generation = 8 × 1 = 8"},
		{"grpo", nil, "reward_funcs (--reward) is required"},
		{"grpo", []string{"--reward", "a,b", "--reward-weights", "1"}, "reward_weights (--reward-weights) has 1 weights for 2 reward functions"},
		{"grpo", []string{"--reward", "a", "--scale-rewards", "max"}, "scale_rewards (--scale-rewards) must be one of group, batch, none"},
		{"grpo", []string{"--reward", "a", "--delta", "1.2"}, "delta (--delta) must be 0 (off) or > 1 + epsilon_high = 1.2, got 1.2"},
		{"grpo", []string{"--reward", "a", "--epsilon-high", "0.28", "--delta", "1.25"}, "delta (--delta) must be 0 (off) or > 1 + epsilon_high = 1.28, got 1.25"},
		{"grpo", []string{"--reward", "a", "--delta", "-2"}, "delta (--delta) must be 0 (off) or > 1 + epsilon_high"},
		{"grpo", []string{"--reward", "a", "--min-p", "1.5"}, "min_p (--min-p) must be in [0, 1] (0 = off), got 1.5"},
		{"grpo", []string{"--reward", "a", "--min-p", "-0.1"}, "min_p (--min-p) must be in [0, 1] (0 = off), got -0.1"},
		{"grpo", []string{"--reward", "a", "--top-entropy-quantile", "1.2"}, "top_entropy_quantile (--top-entropy-quantile) must be in [0, 1] (1 = all tokens), got 1.2"},
		{"grpo", []string{"--reward", "a", "--top-entropy-quantile", "-0.2"}, "top_entropy_quantile (--top-entropy-quantile) must be in [0, 1] (1 = all tokens), got -0.2"},
		{"sft", []string{"--resume", "--resume-from-checkpoint", "x"}, "resume (--resume) and resume_from_checkpoint are exclusive"},
		{"sft", []string{"--packing", "--max-length", "0"}, "max_length (--max-length) must be ≥ 1 with packing (it is the length of a packed row), got 0"},
		{"sft", []string{"--packing", "--packing-strategy", "bfd_split"}, `packing_strategy (--packing-strategy) must be one of bfd, wrapped, got "bfd_split"`},
		{"sft", []string{"--loss-type", "dpo"}, `loss_type (--loss-type) must be one of nll, dft, got "dpo"`},
		{"sft", []string{"--loss-type", ""}, `loss_type (--loss-type) must be one of nll, dft, got ""`},
		{"sft", []string{"--dataset-text-field", ""}, "dataset_text_field (--dataset-text-field) is empty: name the column of the text rows (TRL's default: text)"},
		{"sft", []string{"--eval-strategy", "steps"}, "eval_strategy (--eval-strategy) steps needs an eval_dataset (--eval-dataset), or a dataset_name with a test split (dataset_test_split)"},
		{"kto", []string{"--eval-strategy", "epoch"}, "eval_strategy (--eval-strategy) epoch needs an eval_dataset (--eval-dataset), or a dataset_name with a test split (dataset_test_split)"},
		{"sft", []string{"--eval-on-start"}, "eval_on_start (--eval-on-start) needs an eval_dataset (--eval-dataset), or a dataset_name with a test split (dataset_test_split)"},
		{"sft", []string{"--eval-dataset", "e", "--eval-strategy", "epochs"}, `eval_strategy (--eval-strategy) must be one of no, steps, epoch, got "epochs"`},
		{"dpo", []string{"--eval-dataset", "e", "--eval-strategy", "steps", "--eval-steps", "-1"}, "eval_steps (--eval-steps) must be ≥ 0 (0 = logging_steps), got -1"},
		{"dpo", []string{"--eval-dataset", "e", "--per-device-eval-batch-size", "0"}, "per_device_eval_batch_size (--per-device-eval-batch-size) must be ≥ 1, got 0"},
		{"grpo", []string{"--reward", "a", "--eval-strategy", "steps"}, "eval_strategy (--eval-strategy) steps needs an eval_dataset (--eval-dataset), or a dataset_name with a test split (dataset_test_split)"},
		{"grpo", []string{"--reward", "a", "--eval-dataset", "e", "--eval-strategy", "steps", "--per-device-eval-batch-size", "6"},
			"per_device_eval_batch_size (--per-device-eval-batch-size) (6) must be divisible by num_generations (8)"},
		{"grpo", []string{"--reward", "a", "--eval-dataset", "e", "--eval-on-start", "--num-generations", "4", "--per-device-eval-batch-size", "2"},
			"per_device_eval_batch_size (--per-device-eval-batch-size) (2) must be divisible by num_generations (4)"},
	}
	for _, c := range cases {
		_, err := runCmd(t, c.method, append(c.args, required...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: got %v, want %q", c.method, c.args, err, c.want)
		}
	}
	// HF's Trainer: an eval set with eval_strategy "no" is accepted and never evaluated.
	for _, args := range [][]string{{"--eval-dataset", "e"}, {"--eval-dataset", "e", "--eval-strategy", "steps", "--eval-steps", "5"}} {
		if _, err := runCmd(t, "sft", append(args, required...)...); err != nil {
			t.Errorf("sft %v: %v", args, err)
		}
	}
	// GRPO evaluates too; the eval batch size is only checked when the run evaluates.
	for _, args := range [][]string{{"--eval-dataset", "e", "--per-device-eval-batch-size", "3"},
		{"--eval-dataset", "e", "--eval-strategy", "epoch", "--per-device-eval-batch-size", "16"},
		// TRL reads the sync_ref_model knobs only when it is on; with beta 0 (no reference) it is a no-op.
		{"--ref-model-sync-steps", "0", "--ref-model-mixup-alpha", "2"}, {"--sync-ref-model", "--beta", "0"}} {
		if _, err := runCmd(t, "grpo", append(append(args, "--reward", "a"), required...)...); err != nil {
			t.Errorf("grpo %v: %v", args, err)
		}
	}
	if _, err := runCmd(t, "sft", "--dataset", "d", "--output-dir", "o"); err == nil || !strings.Contains(err.Error(), "model_name_or_path (--model) is required") {
		t.Errorf("missing model: got %v", err)
	}
}

func TestWriteResolved_RoundTrips(t *testing.T) {
	for _, m := range []string{"sft", "dpo", "kto", "grpo"} {
		cfg, _ := trainers.New(m)
		c := cfg.Common()
		c.Model, c.Dataset, c.OutputDir, c.LearningRate = "m", "d", filepath.Join(t.TempDir(), "run"), 3.5e-7
		if g, ok := cfg.(*grpo.Config); ok {
			g.RewardFuncs, g.RewardWeights = []string{"a", "b"}, []float64{1, 0.25}
		}
		if s, ok := cfg.(*sft.Config); ok {
			f := false
			s.CompletionOnlyLoss = &f
		}
		cfg.Resolve()
		path, err := config.WriteResolved(cfg)
		if err != nil {
			t.Fatal(err)
		}
		back, _ := trainers.New(m)
		if err := config.LoadFile(path, back); err != nil {
			t.Fatalf("%s: reload: %v", m, err)
		}
		if !reflect.DeepEqual(back, cfg) {
			data, _ := os.ReadFile(path)
			t.Errorf("%s: round trip differs:\n%s", m, data)
		}
	}
}

func TestTotalStepsAndSchedule(t *testing.T) {
	c := sft.DefaultConfig()
	c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps, c.NumTrainEpochs = 4, 2, 3
	// 10 examples → 3 batches → ceil(3/2) = 2 updates per epoch → 6 steps.
	if got := c.TotalSteps(10); got != 6 {
		t.Errorf("TotalSteps(10) = %d, want 6", got)
	}
	c.NumTrainEpochs = 0.5 // ceil(0.5·2) = 1
	if got := c.TotalSteps(10); got != 1 {
		t.Errorf("0.5 epochs: TotalSteps = %d, want 1", got)
	}
	c.MaxSteps = 7
	if got := c.TotalSteps(10); got != 7 {
		t.Errorf("max_steps 7: TotalSteps = %d", got)
	}
	c.WarmupRatio = 0.1
	s, err := c.Schedule(20)
	if err != nil || s.WarmupSteps != 2 || s.BaseLR != 2e-5 || s.TotalSteps != 20 {
		t.Errorf("Schedule(20) = %+v, %v", s, err)
	}
}

// DPO loss_type is a list (TRL DPOConfig: loss_type list[str], loss_weights list[float]): a flag
// "a,b", a YAML list or a YAML scalar "a,b"; a given flag replaces the default ["sigmoid"].
func TestDPOLossTypeList_FlagAndYAML(t *testing.T) {
	cfg, err := runCmd(t, "dpo", append([]string{"--loss-type", "sigmoid, sft", "--loss-weights", "0.8,1"}, required...)...)
	if err != nil {
		t.Fatal(err)
	}
	d := cfg.(*dpo.Config)
	if !reflect.DeepEqual(d.LossType, []string{"sigmoid", "sft"}) || !reflect.DeepEqual(d.LossWeights, []float64{0.8, 1}) {
		t.Errorf("flags: loss_type %q, loss_weights %v; want [sigmoid sft], [0.8 1]", d.LossType, d.LossWeights)
	}
	cfg, err = runCmd(t, "dpo", append([]string{"--loss-type", "ipo"}, required...)...)
	if d := cfg.(*dpo.Config); err != nil || !reflect.DeepEqual(d.LossType, []string{"ipo"}) {
		t.Errorf("--loss-type ipo: %q, %v; want [ipo] (the default replaced, not appended to)", d.LossType, err)
	}
	for _, doc := range []string{"loss_type: [nca_pair, sft]\nloss_weights: [1, 0.5]\n", "loss_type: nca_pair,sft\nloss_weights: 1,0.5\n"} {
		d := dpo.DefaultConfig()
		if err := config.Load("run.yaml", []byte(doc), d); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d.LossType, []string{"nca_pair", "sft"}) || !reflect.DeepEqual(d.LossWeights, []float64{1, 0.5}) {
			t.Errorf("%q: loss_type %q, loss_weights %v", doc, d.LossType, d.LossWeights)
		}
	}
	d = dpo.DefaultConfig()
	if err := config.Load("run.yaml", []byte("loss_type: hinge\n"), d); err != nil || !reflect.DeepEqual(d.LossType, []string{"hinge"}) {
		t.Errorf("scalar loss_type: %q, %v; want [hinge]", d.LossType, err)
	}
	c := dpo.DefaultConfig()
	c.Model, c.Dataset, c.OutputDir = "m", "d", filepath.Join(t.TempDir(), "run")
	c.LossType, c.LossWeights = []string{"sigmoid", "sft"}, []float64{0.8, 0.2}
	path, err := config.WriteResolved(c)
	if err != nil {
		t.Fatal(err)
	}
	back := dpo.DefaultConfig()
	if err := config.LoadFile(path, back); err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("round trip: %v, %+v", err, back)
	}
}

// HF's Trainer runs max_steps steps when max_steps > 0 and num_train_epochs passes otherwise: the
// default -1, 0 and -5 alike (Trainer.set_initial_training_values: `if args.max_steps > 0 …
// else math.ceil(args.num_train_epochs * num_update_steps_per_epoch)`; TrainingArguments does not
// check the sign). posttrain does the same; with max_steps ≤ 0, num_train_epochs must be > 0.
func TestMaxSteps_NonPositiveMeansEpochs(t *testing.T) {
	for _, steps := range []string{"-1", "0", "-5"} {
		cfg, err := runCmd(t, "sft", append([]string{"--max-steps", steps, "--num-train-epochs", "2", "--per-device-train-batch-size", "4"}, required...)...)
		if err != nil {
			t.Fatalf("--max-steps %s: %v", steps, err)
		}
		if got := cfg.Common().TotalSteps(10); got != 6 { // 3 batches per pass × 2 passes
			t.Errorf("--max-steps %s: TotalSteps(10) = %d, want 6 (2 epochs)", steps, got)
		}
	}
	_, err := runCmd(t, "sft", append([]string{"--max-steps", "0", "--num-train-epochs", "0"}, required...)...)
	if want := "num_train_epochs (--num-train-epochs) must be > 0 and finite when max_steps ≤ 0 (max_steps 0: train num_train_epochs passes), got 0"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("--max-steps 0 --num-train-epochs 0: %v, want %q", err, want)
	}
	if _, err := runCmd(t, "sft", append([]string{"--max-steps", "3", "--num-train-epochs", "0"}, required...)...); err != nil {
		t.Errorf("--max-steps 3 ignores num_train_epochs: %v", err)
	}
}

// NaN and ±Inf are refused in every float option, naming it: by the option's own range check
// where it has one, else by the finiteness check (options read only in some modes included).
func TestValidate_NonFiniteFloatsNamed(t *testing.T) {
	cases := []struct {
		method string
		args   []string
		want   string
	}{
		{"sft", []string{"--learning-rate", "NaN"}, "learning_rate (--learning-rate) must be > 0, got NaN"},
		{"sft", []string{"--weight-decay", "NaN"}, "weight_decay (--weight-decay) must be ≥ 0, got NaN"},
		{"sft", []string{"--max-grad-norm", "+Inf"}, "max_grad_norm (--max-grad-norm) must be ≥ 0 (0 = no clipping), got +Inf"},
		{"sft", []string{"--gpu-memory-fraction", "1.5"}, "gpu_memory_fraction (--gpu-memory-fraction) must be in (0, 1], or 0 for the default, got 1.5"},
		{"grpo", []string{"--gpu-memory-fraction", "NaN"}, "gpu_memory_fraction (--gpu-memory-fraction) must be in (0, 1], or 0 for the default, got NaN"},
		{"sft", []string{"--adam-epsilon", "NaN"}, "adam_epsilon (--adam-epsilon) must be > 0, got NaN"},
		{"sft", []string{"--adam-beta1", "NaN"}, "adam_beta1 (--adam-beta1) must be in [0, 1), got NaN"},
		{"sft", []string{"--warmup-ratio", "NaN"}, "warmup_ratio (--warmup-ratio) must be in [0, 1], got NaN"},
		{"sft", []string{"--max-steps", "5", "--num-train-epochs", "NaN"}, "num_train_epochs (--num-train-epochs) must be a finite number, got NaN"},
		{"dpo", []string{"--beta", "NaN"}, "beta (--beta) must be > 0, got NaN"},
		{"dpo", []string{"--f-alpha-divergence-coef", "NaN"}, "f_alpha_divergence_coef (--f-alpha-divergence-coef) must be a finite number, got NaN"},
		{"kto", []string{"--beta", "-Inf"}, "beta (--beta) must be > 0, got -Inf"},
		{"kto", []string{"--desirable-weight", "NaN"}, "desirable_weight (--desirable-weight) must be > 0, got NaN"},
		{"grpo", []string{"--reward", "a", "--temperature", "NaN"}, "temperature (--temperature) must be > 0, got NaN"},
		{"grpo", []string{"--reward", "a", "--epsilon", "NaN"}, "epsilon (--epsilon) must be > 0, got NaN"},
		{"grpo", []string{"--reward", "a", "--beta", "NaN"}, "beta (--beta) must be ≥ 0, got NaN"},
		{"grpo", []string{"--reward", "a", "--ref-model-mixup-alpha", "NaN"}, "ref_model_mixup_alpha (--ref-model-mixup-alpha) must be a finite number, got NaN"},
		{"grpo", []string{"--reward", "a,b", "--reward-weights", "1,+Inf"}, "reward_weights (--reward-weights) must be finite, got +Inf"},
	}
	for _, c := range cases {
		_, err := runCmd(t, c.method, append(c.args, required...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: got %v, want %q", c.method, c.args, err, c.want)
		}
	}
}

// report_to: none by default, tensorboard (or all) as a flag, a YAML scalar or HF's list form; the
// other HF integrations are refused by name (they need a service posttrain has not), unknown names
// and none mixed with another too.
func TestReportTo(t *testing.T) {
	cfg, err := runCmd(t, "sft", required...)
	if err != nil || cfg.Common().ReportsTo("tensorboard") {
		t.Errorf("default: %q, %v; want none", cfg.Common().ReportTo, err)
	}
	for _, args := range [][]string{{"--report-to", "tensorboard"}, {"--report-to", "all"}} {
		cfg, err := runCmd(t, "grpo", append(append(args, "--reward", "a"), required...)...)
		if err != nil || !cfg.Common().ReportsTo("tensorboard") {
			t.Errorf("%v: %q, %v", args, cfg.Common().ReportTo, err)
		}
	}
	for _, doc := range []string{"report_to: tensorboard\n", "report_to: [tensorboard]\n", "report_to:\n  - tensorboard\n"} {
		c := dpo.DefaultConfig()
		if err := config.Load("run.yaml", []byte(doc), c); err != nil || !reflect.DeepEqual(c.ReportTo, []string{"tensorboard"}) {
			t.Errorf("%q: %q, %v", doc, c.ReportTo, err)
		}
	}
	for _, c := range []struct{ value, want string }{
		{"wandb", "report_to (--report-to) wandb is not available in posttrain (it reports to a service or library posttrain has not, and training runs offline); use tensorboard"},
		{"tensorboard,mlflow", "report_to (--report-to) mlflow is not available in posttrain"},
		{"tensorbord", `report_to (--report-to) must be none, tensorboard or all (a list of them), got "tensorbord"`},
		{"none,tensorboard", "report_to (--report-to) none cannot be combined with other integrations, got none,tensorboard"},
	} {
		if _, err := runCmd(t, "kto", append([]string{"--report-to", c.value}, required...)...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--report-to %s: %v, want %q", c.value, err, c.want)
		}
	}
}

// RewardConfig's v0.24 defaults (lr 1e-4, max_length 1024, center_rewards_coefficient None) and
// its checks.
func TestReward_DefaultsAndValidate(t *testing.T) {
	c := reward.DefaultConfig()
	if c.LearningRate != 1e-4 || c.MaxLength != 1024 || c.CenterRewardsCoefficient != 0 || c.LoggingSteps != 10 || c.Method() != "reward" {
		t.Errorf("defaults: %+v", c)
	}
	c.Model, c.Dataset, c.OutputDir = "m", "d", "o"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for key, set := range map[string]func(*reward.Config){
		"max_length":                 func(r *reward.Config) { r.MaxLength = -1 },
		"center_rewards_coefficient": func(r *reward.Config) { r.CenterRewardsCoefficient = -0.1 },
	} {
		bad := *c
		set(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v, want one naming it", key, err)
		}
	}
	if got, err := trainers.New("reward"); err != nil || got.Method() != "reward" {
		t.Errorf("trainers.New(reward) = %v, %v", got, err)
	}
}
