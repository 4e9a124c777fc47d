// Package config holds the training configuration of posttrain's trainers with TRL v0.24 /
// HF TrainingArguments names and defaults, and its command-line glue.
//
// One source of truth: each option is one struct field whose tags give its YAML key (the TRL name),
// its flag (default: the key in kebab-case), its help text and, for choices, the allowed values:
//
//	LearningRate float64 `yaml:"learning_rate" usage:"initial AdamW learning rate"`
//
// Flags builds the urfave/cli flags from the fields; FromCommand resolves defaults < --config
// FILE.yaml < flags given explicitly, validates, and returns one clear error line.
package config

import (
	"math"
	"os"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/schedule"
)

// Config is implemented by every method's configuration (sft.Config, dpo.Config, kto.Config,
// grpo.Config, reward.Config, ppo.Config: each beside its method, in trainers/).
type Config interface {
	// Method is the subcommand name: "sft", "dpo", "kto", "grpo", "reward" or "ppo".
	Method() string
	// Default returns a new configuration of the same method with its defaults (TRL's).
	Default() Config
	// Common returns the options shared by every trainer.
	Common() *Training
	// Resolve fills options whose default depends on others (TRL's __post_init__).
	Resolve()
	// Validate reports the first invalid option as one line naming it.
	Validate() error
}

// Training holds the options every trainer shares: HF TrainingArguments names with TRL v0.24's
// overrides (logging_steps 10), plus the model/dataset inputs of TRL's CLI scripts.
type Training struct {
	Model   string `yaml:"model_name_or_path" input:"path" resume:"content" flag:"model" usage:"model directory or Hub id (HF layout)"`
	Dataset string `yaml:"dataset_name" input:"path" resume:"content" flag:"dataset" usage:"training data: a Hub dataset id, a dataset directory (the Hub's layout or save_to_disk's) or a file (.jsonl, .json, .parquet, .arrow, .csv, .gz of the text ones)"`
	// Datasets is TRL's dataset mixture (a config's `datasets:` list, DatasetMixtureConfig): read in
	// place of dataset_name, each entry's split of its path, and concatenated. YAML only.
	Datasets []data.MixtureEntry `yaml:"datasets" flag:"-" usage:"TRL's dataset mixture: a list of {path, name, split, columns}, concatenated (YAML only)"`
	// TRL's ScriptArguments: which configuration and splits of dataset_name are read.
	DatasetConfig     string `yaml:"dataset_config" usage:"the dataset's configuration (load_dataset's name): one of its README.md configs"`
	DatasetTrainSplit string `yaml:"dataset_train_split" usage:"the split trained on, with an optional slice: train, train[:1000], train[10%:], train+test"`
	// TRL's CLI scripts take the eval rows from a split of dataset_name (dataset_test_split);
	// posttrain does too, unless eval_dataset names other data.
	DatasetTestSplit string `yaml:"dataset_test_split" resume:"free" usage:"the split of dataset_name evaluated on when no eval_dataset is given (with an optional slice)"`
	EvalDataset      string `yaml:"eval_dataset" input:"path" resume:"free" usage:"evaluation data (the same forms as --dataset; a directory's dataset_test_split); default: dataset_name's dataset_test_split. Evaluated only when eval_strategy is steps or epoch, or with eval_on_start (as HF's Trainer)"`

	OutputDir                 string   `yaml:"output_dir" resume:"free" usage:"directory for checkpoints, metrics.jsonl and the final model"`
	LearningRate              float64  `yaml:"learning_rate" usage:"initial AdamW learning rate"`
	PerDeviceTrainBatchSize   int      `yaml:"per_device_train_batch_size" usage:"examples per micro-batch"`
	GradientAccumulationSteps int      `yaml:"gradient_accumulation_steps" usage:"micro-batches per optimizer step"`
	NumTrainEpochs            float64  `yaml:"num_train_epochs" usage:"passes over the data (ignored when max_steps > 0)"`
	MaxSteps                  int      `yaml:"max_steps" usage:"optimizer steps to run; ≤ 0 (-1, 0) = use num_train_epochs, as HF's Trainer"`
	WarmupRatio               float64  `yaml:"warmup_ratio" usage:"fraction of steps for linear warmup (used when warmup_steps is 0)"`
	WarmupSteps               int      `yaml:"warmup_steps" usage:"linear warmup steps (overrides warmup_ratio when > 0)"`
	LRSchedulerType           string   `yaml:"lr_scheduler_type" enum:"linear|cosine|constant|constant_with_warmup" usage:"learning-rate schedule"`
	MaxGradNorm               float64  `yaml:"max_grad_norm" usage:"global-norm gradient clipping threshold; 0 = no clipping"`
	WeightDecay               float64  `yaml:"weight_decay" usage:"AdamW decoupled weight decay"`
	AdamBeta1                 float64  `yaml:"adam_beta1" usage:"AdamW beta1"`
	AdamBeta2                 float64  `yaml:"adam_beta2" usage:"AdamW beta2"`
	AdamEpsilon               float64  `yaml:"adam_epsilon" usage:"AdamW epsilon"`
	Seed                      int      `yaml:"seed" usage:"random seed (data order, sampling, initialisation)"`
	LoggingSteps              int      `yaml:"logging_steps" resume:"free" usage:"write a metrics.jsonl line every N optimizer steps"`
	ReportTo                  []string `yaml:"report_to" resume:"free" usage:"where to report the logged metrics besides metrics.jsonl: none, or tensorboard (event files under OUTPUT_DIR/runs/; all = tensorboard, the one integration posttrain has); HF's wandb, mlflow, ... need a network service and are not available"`
	SaveSteps                 int      `yaml:"save_steps" resume:"free" usage:"save OUTPUT_DIR/checkpoint-N every N steps; 0 = only at the end"`
	SaveTotalLimit            int      `yaml:"save_total_limit" resume:"free" usage:"keep at most N checkpoints, deleting the oldest; 0 = keep all"`
	EvalStrategy              string   `yaml:"eval_strategy" resume:"free" enum:"no|steps|epoch" usage:"evaluate on eval_dataset every eval_steps steps, or at the end of each epoch; no = never, even with an eval_dataset (HF's Trainer)"`
	EvalSteps                 int      `yaml:"eval_steps" resume:"free" usage:"evaluate every N optimizer steps with eval_strategy steps; 0 = logging_steps"`
	PerDeviceEvalBatchSize    int      `yaml:"per_device_eval_batch_size" resume:"free" usage:"examples per evaluation batch"`
	EvalOnStart               bool     `yaml:"eval_on_start" resume:"free" usage:"evaluate once before the first step (a sanity check)"`
	BF16                      bool     `yaml:"bf16" usage:"bf16 weights and activations with float32 master weights and optimizer state; default: on with a GPU backend (TRL's default), off on a CPU"`
	GradientCheckpointing     bool     `yaml:"gradient_checkpointing" resume:"free" usage:"recompute each decoder layer's activations and the LM head's logits in the backward pass instead of keeping them (less memory; each layer's forward pass runs twice); TRL's default, but not PPO's"`
	Resume                    bool     `yaml:"resume" resume:"free" usage:"continue from the latest OUTPUT_DIR/checkpoint-N"`
	ResumeFromCheckpoint      string   `yaml:"resume_from_checkpoint" resume:"free" usage:"continue from this checkpoint directory"`
	OverwriteOutputDir        bool     `yaml:"overwrite_output_dir" resume:"free" usage:"start afresh in an output_dir that holds a previous run, removing that run's checkpoints, logs and model first (only the files a run writes); without it such a run is refused"`
	ResumeOverride            []string `yaml:"resume_override" resume:"free" usage:"options that may differ from the resumed checkpoint's training_args.yaml (comma-separated keys, e.g. learning_rate,max_steps; all = no check); without it a resume whose trajectory options, model or dataset differ is refused"`
	Backend                   string   `yaml:"backend" resume:"free" usage:"GoMLX backend: go[:options], xla:cuda, xla:cpu, xla:/path/to/pjrt_plugin.so (default: $GOMLX_BACKEND, else xla:cuda on a machine with an NVIDIA GPU, else xla:cpu when its plugin is installed, else go)"`

	// The GPU client's options (CUDA plugins; docs/gpu.md). Not written when unset.
	GPUMemoryFraction float64 `yaml:"gpu_memory_fraction,omitempty" resume:"free" usage:"share of each GPU's memory XLA's allocator reserves, in (0, 1]; 0 = $XLA_PYTHON_CLIENT_MEM_FRACTION (JAX's), else 0.9"`
	FullDeterminism   bool    `yaml:"full_determinism,omitempty" resume:"free" usage:"deterministic GPU kernels (XLA's --xla_gpu_deterministic_ops: scatters and reductions without float atomics), meant to make a GPU run repeat bit for bit; slower"`
	TF32              bool    `yaml:"tf32,omitempty" resume:"free" usage:"let float32 matrix products run in TF32 on NVIDIA tensor cores (~1e-3 relative); off, as PyTorch's default, keeps them float32"`

	// Devices splits each micro-batch over this many devices of the backend (data parallel,
	// accelerate's num_processes): the global batch is per_device_train_batch_size × devices ×
	// gradient_accumulation_steps. 0 = the backend's devices, resolved before training (1 on the
	// pure-Go backend and on XLA's CPU plugin, whose devices share the same cores); a resolved
	// count of 1 is written as 0, so that training_args.yaml of a one-device run is unchanged.
	// FSDP splits the trained weights, their float32 masters, the gradient accumulators and the
	// AdamW moments over the devices along their first axis (PyTorch FSDP's full_shard); off,
	// every device holds all of them. Not written when off.
	FSDP bool `yaml:"fsdp,omitempty" resume:"free" usage:"with devices > 1: split the weights, float32 masters, gradient accumulators and AdamW moments over the devices along their first axis (full_shard); XLA backends only"`
	// TensorParallel splits the attention and MLP projections over the devices instead of the
	// batch (Megatron's column/row split as sharding specs: q/k/v, gate and up by output rows, o
	// and down by input columns, each with what trains or accumulates beside it); every device
	// sees the whole micro-batch, so the global batch is per_device_train_batch_size ×
	// gradient_accumulation_steps. Not written when off.
	TensorParallel bool `yaml:"tensor_parallel,omitempty" resume:"free" usage:"with devices > 1: split the attention and MLP projections over the devices (Megatron column/row split) instead of the batch; the global batch is per_device_train_batch_size × gradient_accumulation_steps; XLA backends only"`
	Devices        int  `yaml:"devices,omitempty" usage:"devices each micro-batch is split over (data parallel; the global batch is per_device_train_batch_size × devices × gradient_accumulation_steps); default: every device of the backend, 1 on the pure-Go backend and on XLA's CPU plugin"`
}

// DefaultTraining returns HF TrainingArguments' defaults with TRL v0.24's logging_steps 10.
// LearningRate is set by each method's default.
func DefaultTraining() Training {
	return Training{
		PerDeviceTrainBatchSize:   8,
		GradientAccumulationSteps: 1,
		NumTrainEpochs:            3,
		MaxSteps:                  -1,
		LRSchedulerType:           string(schedule.Linear),
		MaxGradNorm:               1.0,
		AdamBeta1:                 0.9,
		AdamBeta2:                 0.999,
		AdamEpsilon:               1e-8,
		Seed:                      42,
		LoggingSteps:              10,
		ReportTo:                  []string{"none"},
		SaveSteps:                 500,
		EvalStrategy:              "no",
		PerDeviceEvalBatchSize:    8,
		DatasetTrainSplit:         "train",
		DatasetTestSplit:          "test",
	}
}

// EvalSource is where the run's eval rows come from: eval_dataset (a directory's
// dataset_test_split, a file whole), else dataset_name's dataset_test_split.
func (t *Training) EvalSource() (path, split string) {
	if t.EvalDataset != "" {
		if st, err := os.Stat(t.EvalDataset); err == nil && st.IsDir() {
			return t.EvalDataset, t.DatasetTestSplit
		}
		return t.EvalDataset, ""
	}
	return t.Dataset, t.DatasetTestSplit
}

// HasSplits reports whether dataset_name can hold several splits: a directory or a Hub id, not a
// single file or a generated source.
func (t *Training) HasSplits() bool {
	if len(t.Datasets) > 0 {
		return false // a mixture is one split, as TRL's get_dataset makes it without test_split_size
	}
	if st, err := os.Stat(t.Dataset); err == nil {
		return st.IsDir()
	}
	return strings.Count(t.Dataset, "/") == 1 && !strings.HasPrefix(t.Dataset, ".")
}

// Common implements Config.
func (t *Training) Common() *Training { return t }

// DefaultBF16OnGPU turns bf16 on for a run on a GPU whose --config and flags leave bf16 unset
// (given false; Given), as TRL's configs do (bf16 None → not fp16, i.e. True); on a CPU
// posttrain's default stays float32 (XLA's CPU plugin multiplies bfloat16 far slower than
// float32: docs/xla.md). It reports whether it did.
func (t *Training) DefaultBF16OnGPU(gpu, given bool) bool {
	if !gpu || t.BF16 || given {
		return false
	}
	t.BF16 = true
	return true
}

// TotalSteps is the number of optimizer steps of the run for numExamples training examples, as HF
// Trainer counts them: max_steps if > 0, else ceil(num_train_epochs · updates per epoch) with
// updates per epoch = max(1, ceil(ceil(numExamples / batch) / gradient_accumulation_steps)).
func (t *Training) TotalSteps(numExamples int) int {
	if t.MaxSteps > 0 {
		return t.MaxSteps
	}
	batches := CeilDiv(numExamples, t.MicroBatch())
	perEpoch := max(1, CeilDiv(batches, t.GradientAccumulationSteps))
	return int(math.Ceil(t.NumTrainEpochs * float64(perEpoch)))
}

// DeviceCount is the number of devices a micro-batch is split over: Devices, or 1 when 0.
func (t *Training) DeviceCount() int { return max(1, t.Devices) }

// MicroBatch is the examples of one micro-batch over all devices: per_device_train_batch_size ×
// devices (the per_device_train_batch_size examples of a one-device run).
func (t *Training) MicroBatch() int { return t.PerDeviceTrainBatchSize * t.DataParallel() }

// DataParallel is the number of model replicas the batch is split over: the devices, or 1 with
// tensor_parallel (the devices then hold one replica between them).
func (t *Training) DataParallel() int {
	if t.TensorParallel {
		return 1
	}
	return t.DeviceCount()
}

// Schedule returns the learning-rate schedule of a run of totalSteps optimizer steps.
func (t *Training) Schedule(totalSteps int) (schedule.Schedule, error) {
	w := schedule.WarmupSteps(t.WarmupSteps, t.WarmupRatio, totalSteps)
	return schedule.New(schedule.Type(t.LRSchedulerType), t.LearningRate, w, totalSteps)
}

// Evaluates reports whether the run evaluates on eval_dataset at all: eval_strategy steps or epoch,
// or eval_on_start. HF's Trainer never evaluates during training with eval_strategy "no".
func (t *Training) Evaluates() bool {
	return t.EvalStrategy == "steps" || t.EvalStrategy == "epoch" || t.EvalOnStart
}

// ReportsTo reports whether the metrics go to integration ("tensorboard") besides metrics.jsonl:
// named in report_to, or report_to all (HF: every integration installed).
func (t *Training) ReportsTo(integration string) bool {
	return slices.Contains(t.ReportTo, integration) || slices.Contains(t.ReportTo, "all")
}

// EvalEvery is the step interval of eval_strategy steps: eval_steps, or logging_steps when 0
// (TrainingArguments.__post_init__).
func (t *Training) EvalEvery() int {
	if t.EvalSteps > 0 {
		return t.EvalSteps
	}
	return t.LoggingSteps
}

// CeilDiv is ⌈a/b⌉ for a ≥ 0, b > 0 (0 when b ≤ 0).
func CeilDiv(a, b int) int {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// DropoutSetting is a configuration whose method can train without dropout.
type DropoutSetting interface {
	// DropoutDisabled reports whether the run trains without dropout.
	DropoutDisabled() bool
}

// DisableDropout reports whether cfg's run trains without dropout: TRL's disable_dropout (DPO and
// KTO by default, GRPO when asked; always for PPO, as TRL's PPOTrainer; SFT and reward models keep
// theirs, having no such option in TRL).
func DisableDropout(cfg Config) bool {
	d, ok := cfg.(DropoutSetting)
	return ok && d.DropoutDisabled()
}
