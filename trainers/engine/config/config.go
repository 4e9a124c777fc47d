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
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/trainers/engine/schedule"
)

// Config is implemented by every method's configuration (*SFT, *DPO, *KTO, *GRPO).
type Config interface {
	// Method is the subcommand name: "sft", "dpo", "kto" or "grpo".
	Method() string
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
	Dataset string `yaml:"dataset_name" input:"path" resume:"content" flag:"dataset" usage:"training data file (JSONL)"`
	// TRL's CLI scripts take the eval rows from a split of dataset_name (dataset_test_split);
	// posttrain reads them from a second file.
	EvalDataset string `yaml:"eval_dataset" input:"path" resume:"free" usage:"evaluation data file (JSONL, the same formats as --dataset); evaluated only when eval_strategy is steps or epoch, or with eval_on_start (as HF's Trainer)"`

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
	BF16                      bool     `yaml:"bf16" usage:"bf16 weights and activations with float32 master weights and optimizer state"`
	Resume                    bool     `yaml:"resume" resume:"free" usage:"continue from the latest OUTPUT_DIR/checkpoint-N"`
	ResumeFromCheckpoint      string   `yaml:"resume_from_checkpoint" resume:"free" usage:"continue from this checkpoint directory"`
	OverwriteOutputDir        bool     `yaml:"overwrite_output_dir" resume:"free" usage:"start afresh in an output_dir that holds a previous run, removing that run's checkpoints, logs and model first (only the files a run writes); without it such a run is refused"`
	ResumeOverride            []string `yaml:"resume_override" resume:"free" usage:"options that may differ from the resumed checkpoint's training_args.yaml (comma-separated keys, e.g. learning_rate,max_steps; all = no check); without it a resume whose trajectory options, model or dataset differ is refused"`
	Backend                   string   `yaml:"backend" resume:"free" usage:"GoMLX backend: go[:options], xla:cuda, xla:cpu (default: $GOMLX_BACKEND, else go)"`

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
	}
}

// Common implements Config.
func (t *Training) Common() *Training { return t }

// TotalSteps is the number of optimizer steps of the run for numExamples training examples, as HF
// Trainer counts them: max_steps if > 0, else ceil(num_train_epochs · updates per epoch) with
// updates per epoch = max(1, ceil(ceil(numExamples / batch) / gradient_accumulation_steps)).
func (t *Training) TotalSteps(numExamples int) int {
	if t.MaxSteps > 0 {
		return t.MaxSteps
	}
	batches := ceilDiv(numExamples, t.MicroBatch())
	perEpoch := max(1, ceilDiv(batches, t.GradientAccumulationSteps))
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

func ceilDiv(a, b int) int {
	if b <= 0 {
		return 0
	}
	return (a + b - 1) / b
}

// SFT is TRL's SFTConfig subset that posttrain implements.
type SFT struct {
	Training           `yaml:",inline"`
	MaxLength          int    `yaml:"max_length" usage:"truncate tokenized examples to this many tokens; with packing, the length of a packed row (wrapped packing cuts across examples instead)"`
	CompletionOnlyLoss *bool  `yaml:"completion_only_loss" usage:"loss on completion tokens only (default: on for prompt-completion data)"`
	AssistantOnlyLoss  *bool  `yaml:"assistant_only_loss" usage:"loss on assistant tokens only (default: on for conversational messages data; false = every token, TRL's default)"`
	Packing            bool   `yaml:"packing" usage:"pack the tokenized examples into rows of max_length tokens (fewer, fuller rows)"`
	PackingStrategy    string `yaml:"packing_strategy" enum:"bfd|wrapped" usage:"bfd: whole examples (cut to max_length) by best-fit decreasing, attention never crosses examples; wrapped: concatenate and cut every max_length tokens, attention spans the row"`
	PaddingFree        bool   `yaml:"padding_free" usage:"accepted for TRL compatibility: posttrain's masks already give flash-attention's padding-free numbers, so it changes nothing"`
	LossType           string `yaml:"loss_type" enum:"nll|dft" usage:"nll: negative log-likelihood of the scored tokens; dft: Dynamic Fine-Tuning (arXiv:2508.05629), each token's NLL weighted by its detached probability"`
	EOSToken           string `yaml:"eos_token" usage:"replace the tokenizer's eos_token with this token of its vocabulary (appended to text rows and completions, saved in the output's tokenizer_config.json); empty = the tokenizer's"`
	ChatTemplatePath   string `yaml:"chat_template_path" input:"path" usage:"chat template for conversational rows, saved with the model: a .jinja/.j2 file, or a tokenizer directory (its template and eos_token, as TRL's clone_chat_template; its tokens must already be in the vocabulary)"`
	DatasetTextField   string `yaml:"dataset_text_field" usage:"the column standard language-modelling rows are read from (conversational rows are always \"messages\"); as TRL v0.24, EOS is appended to these rows only when it is \"text\""`
	PEFT               `yaml:",inline"`
}

// DefaultSFT returns SFTConfig's v0.24 defaults.
func DefaultSFT() *SFT {
	c := &SFT{Training: DefaultTraining(), PEFT: DefaultPEFT(), MaxLength: 1024, PackingStrategy: "bfd", LossType: "nll", DatasetTextField: "text"}
	c.LearningRate = 2e-5
	return c
}

// Method implements Config.
func (*SFT) Method() string { return "sft" }

// Resolve implements Config; SFT has no derived defaults (completion_only_loss depends on the data).
func (*SFT) Resolve() {}

// DPO is TRL's DPOConfig subset that posttrain implements.
type DPO struct {
	Training              `yaml:",inline"`
	Beta                  float64   `yaml:"beta" usage:"β: strength of the implicit KL penalty to the reference model"`
	LossType              []string  `yaml:"loss_type" enum:"sigmoid|ipo|hinge|robust|exo_pair|nca_pair|sppo_hard|aot|aot_pair|discopop|apo_zero|apo_down|sft" usage:"DPO loss variant, or several comma-separated (summed with loss_weights; MPO: sigmoid,bco_pair,sft, but bco_pair is not implemented)"`
	LossWeights           []float64 `yaml:"loss_weights" usage:"weight of each loss_type in the sum (default: all 1)"`
	LabelSmoothing        float64   `yaml:"label_smoothing" usage:"label-flip probability ε in [0, 0.5): cDPO for sigmoid (and aot, aot_pair), robust DPO's ε, EXO's ε (0 = 1e-3 with exo_pair, as TRL)"`
	DiscopopTau           float64   `yaml:"discopop_tau" usage:"DiscoPOP's temperature τ of the log-ratio modulation (loss_type discopop)"`
	RPOAlpha              float64   `yaml:"rpo_alpha" usage:"RPO: add rpo_alpha × the NLL of the chosen completions to the loss and log nll_loss (the paper uses 1.0); 0 = off (TRL's None)"`
	ReferenceFree         bool      `yaml:"reference_free" usage:"the loss's logits (sigmoid, robust, exo_pair, hinge, ipo) and log-ratios (apo_zero, apo_down) use a reference log-prob of 0, as TRL; rewards/* and the other types still use the reference"`
	FDivergenceType       string    `yaml:"f_divergence_type" enum:"reverse_kl|forward_kl|js_divergence|alpha_divergence" usage:"f-DPO divergence of the logits of sigmoid, robust, exo_pair, hinge and ipo (forward_kl = reverse_kl in TRL v0.24)"`
	FAlphaDivergenceCoef  float64   `yaml:"f_alpha_divergence_coef" usage:"α of f_divergence_type alpha_divergence, f(u) = (1 − u^−α)/α"`
	UseWeighting          bool      `yaml:"use_weighting" usage:"WPO: weight each pair's loss by min(exp(w(y_w) + w(y_l)), 1), w the policy's mean token log-prob minus log Σ_v p², as TRL"`
	LDAlpha               float64   `yaml:"ld_alpha" usage:"LD-DPO: the policy's log-probs past the shorter completion's length are scaled by ld_alpha (the paper: in [0, 1]); 0 = off (TRL's None)"`
	MaxLength             int       `yaml:"max_length" usage:"truncate prompt+completion to this many tokens, as truncation_mode says"`
	MaxPromptLength       int       `yaml:"max_prompt_length" usage:"truncate prompts to their last this many tokens"`
	MaxCompletionLength   int       `yaml:"max_completion_length" usage:"truncate completions to their first this many tokens; 0 = no limit"`
	TruncationMode        string    `yaml:"truncation_mode" enum:"keep_end|keep_start" usage:"which end of prompt+completion max_length keeps (keep_end can drop the whole prompt)"`
	PrecomputeRefLogProbs bool      `yaml:"precompute_ref_log_probs" usage:"accepted for TRL compatibility: posttrain always computes the reference log-probs once, before training, from the starting weights (no second resident copy)"`
	DisableDropout        bool      `yaml:"disable_dropout" usage:"train without dropout (the LoRA adapter's lora_dropout; the decoders have no other): TRL's default for DPO"`
	PEFT                  `yaml:",inline"`
}

// DefaultDPO returns DPOConfig's v0.24 defaults.
func DefaultDPO() *DPO {
	c := &DPO{Training: DefaultTraining(), PEFT: DefaultPEFT(), Beta: 0.1, LossType: []string{"sigmoid"}, DiscopopTau: 0.05, FDivergenceType: "reverse_kl", FAlphaDivergenceCoef: 1, MaxLength: 1024, MaxPromptLength: 512, TruncationMode: "keep_end", DisableDropout: true}
	c.LearningRate = 1e-6
	return c
}

// Method implements Config.
func (*DPO) Method() string { return "dpo" }

// Resolve implements Config.
func (*DPO) Resolve() {}

// KTO is TRL's KTOConfig subset that posttrain implements.
type KTO struct {
	Training            `yaml:",inline"`
	Beta                float64 `yaml:"beta" usage:"β: strength of the implicit KL penalty to the reference model"`
	LossType            string  `yaml:"loss_type" enum:"kto|apo_zero_unpaired" usage:"KTO loss, or APO-zero's unpaired variant (no KL reference point)"`
	DesirableWeight     float64 `yaml:"desirable_weight" usage:"loss weight of desirable (label true) examples"`
	UndesirableWeight   float64 `yaml:"undesirable_weight" usage:"loss weight of undesirable (label false) examples"`
	MaxLength           int     `yaml:"max_length" usage:"truncate prompt+completion to this many tokens: first the prompt to max_prompt_length, then the completion"`
	MaxPromptLength     int     `yaml:"max_prompt_length" usage:"length a prompt is cut to when prompt+completion exceeds max_length"`
	MaxCompletionLength int     `yaml:"max_completion_length" usage:"accepted for TRL compatibility: TRL's KTOTrainer applies it to encoder-decoder models only, so it has no effect here"`
	TruncationMode      string  `yaml:"truncation_mode" enum:"keep_end|keep_start" usage:"which end of a too-long prompt is kept"`
	DisableDropout      bool    `yaml:"disable_dropout" usage:"train without dropout (the LoRA adapter's lora_dropout; the decoders have no other): TRL's default for KTO"`
	PEFT                `yaml:",inline"`
}

// DefaultKTO returns KTOConfig's v0.24 defaults.
func DefaultKTO() *KTO {
	c := &KTO{Training: DefaultTraining(), PEFT: DefaultPEFT(), Beta: 0.1, LossType: "kto", DesirableWeight: 1, UndesirableWeight: 1, MaxLength: 1024, MaxPromptLength: 512, TruncationMode: "keep_end", DisableDropout: true}
	c.LearningRate = 1e-6
	return c
}

// Method implements Config.
func (*KTO) Method() string { return "kto" }

// Resolve implements Config.
func (*KTO) Resolve() {}

// GRPO is TRL's GRPOConfig subset that posttrain implements. per_device_train_batch_size counts
// completions, not prompts (TRL #2776).
type GRPO struct {
	Training                 `yaml:",inline"`
	RewardFuncs              []string  `yaml:"reward_funcs" flag:"reward" usage:"verifier reward function name(s), comma-separated"`
	RewardModels             []string  `yaml:"reward_model_name_or_path" input:"path" flag:"reward-model" usage:"reward model checkpoint(s) (*ForSequenceClassification, num_labels 1, e.g. posttrain reward's output), comma-separated or repeated: each scores prompt+completion through its own chat template and counts as a reward function named after its directory, before reward_funcs (TRL's grpo.py order)"`
	RewardWeights            []float64 `yaml:"reward_weights" usage:"weight of each reward model, then of each reward function (default: all 1)"`
	NumGenerations           int       `yaml:"num_generations" usage:"completions sampled per prompt (group size G)"`
	MaxPromptLength          int       `yaml:"max_prompt_length" usage:"truncate prompts (left) to this many tokens"`
	MaxCompletionLength      int       `yaml:"max_completion_length" usage:"maximum generated tokens per completion"`
	Temperature              float64   `yaml:"temperature" usage:"sampling temperature (log-probs are scored at it too)"`
	TopP                     float64   `yaml:"top_p" usage:"nucleus sampling mass in (0, 1]; 1 = off"`
	TopK                     int       `yaml:"top_k" usage:"top-k sampling; 0 = off"`
	MinP                     float64   `yaml:"min_p" usage:"min-p sampling in [0, 1]: keep tokens with probability ≥ min_p × the top one's, after top-k/top-p; 0 = off"`
	RepetitionPenalty        float64   `yaml:"repetition_penalty" usage:"divide positive (multiply negative) logits of tokens already in the prompt or completion by this when sampling; > 1 discourages repeats; 1 = off"`
	Beta                     float64   `yaml:"beta" usage:"KL coefficient; 0 = no reference model is loaded"`
	Epsilon                  float64   `yaml:"epsilon" usage:"lower clipping range ε of the ratio"`
	EpsilonHigh              float64   `yaml:"epsilon_high" usage:"upper clipping range; 0 = epsilon (DAPO uses 0.28)"`
	Delta                    float64   `yaml:"delta" usage:"two-sided clipping (INTELLECT-2): cap the unclipped ratio at delta, > 1 + epsilon_high; 0 = off"`
	LossType                 string    `yaml:"loss_type" enum:"grpo|bnpo|dr_grpo|dapo" usage:"token aggregation of the loss"`
	ScaleRewards             string    `yaml:"scale_rewards" enum:"group|batch|none" usage:"divide advantages by the group's or batch's reward std, or not (Dr. GRPO)"`
	ImportanceSamplingLevel  string    `yaml:"importance_sampling_level" enum:"token|sequence" usage:"ratio per token, or per sequence (GSPO)"`
	Advantage                string    `yaml:"advantage" enum:"grpo|rloo" usage:"baseline: group mean (GRPO) or leave-one-out (RLOO); posttrain extension"`
	NumIterations            int       `yaml:"num_iterations" usage:"updates per generated batch (μ)"`
	StepsPerGeneration       int       `yaml:"steps_per_generation" usage:"optimizer micro-steps per generation; 0 = gradient_accumulation_steps"`
	MaskTruncatedCompletions bool      `yaml:"mask_truncated_completions" usage:"exclude completions cut at max_completion_length from the loss (DAPO)"`
	TopEntropyQuantile       float64   `yaml:"top_entropy_quantile" usage:"keep in the policy loss only the tokens whose entropy is in this top fraction of the micro-batch's completion tokens, in [0, 1] (80/20 paper: 0.2); 1 = all tokens"`
	LogCompletions           bool      `yaml:"log_completions" resume:"free" usage:"also print a few sampled completions to the log every logging step (OUTPUT_DIR/completions.jsonl always gets them)"`
	SyncRefModel             bool      `yaml:"sync_ref_model" usage:"TR-DPO: every ref_model_sync_steps steps mix the policy into the reference, ref = α·policy + (1−α)·ref; no effect with beta 0 (no reference)"`
	RefModelMixupAlpha       float64   `yaml:"ref_model_mixup_alpha" usage:"α of sync_ref_model, in [0, 1]"`
	RefModelSyncSteps        int       `yaml:"ref_model_sync_steps" usage:"τ of sync_ref_model: mix after every step that is a multiple of it, ≥ 1"`
	DisableDropout           bool      `yaml:"disable_dropout" usage:"train without dropout (the LoRA adapter's lora_dropout; the decoders have no other); off by default, as TRL's GRPOConfig"`
	PEFT                     `yaml:",inline"`
}

// DefaultGRPO returns GRPOConfig's v0.24 defaults.
func DefaultGRPO() *GRPO {
	c := &GRPO{
		Training: DefaultTraining(), PEFT: DefaultPEFT(), NumGenerations: 8, MaxPromptLength: 512, MaxCompletionLength: 256,
		Temperature: 1, TopP: 1, RepetitionPenalty: 1, Beta: 0, Epsilon: 0.2, LossType: "dapo", ScaleRewards: "group",
		ImportanceSamplingLevel: "token", Advantage: "grpo", NumIterations: 1, TopEntropyQuantile: 1,
		RefModelMixupAlpha: 0.6, RefModelSyncSteps: 512,
	}
	c.LearningRate = 1e-6
	return c
}

// Method implements Config.
func (*GRPO) Method() string { return "grpo" }

// Resolve implements Config: epsilon_high defaults to epsilon and steps_per_generation to
// gradient_accumulation_steps, as GRPOConfig.__post_init__ does; scale_rewards true/false mean
// group/none, as TRL v0.24 still accepts.
func (c *GRPO) Resolve() {
	switch strings.ToLower(c.ScaleRewards) {
	case "true":
		c.ScaleRewards = "group"
	case "false":
		c.ScaleRewards = "none"
	}
	if c.EpsilonHigh == 0 {
		c.EpsilonHigh = c.Epsilon
	}
	if c.StepsPerGeneration == 0 {
		c.StepsPerGeneration = c.GradientAccumulationSteps
	}
}

// dropoutSetting is a configuration whose method can train without dropout.
type dropoutSetting interface{ dropoutDisabled() bool }

func (c *DPO) dropoutDisabled() bool  { return c.DisableDropout }
func (c *KTO) dropoutDisabled() bool  { return c.DisableDropout }
func (c *GRPO) dropoutDisabled() bool { return c.DisableDropout }

// dropoutDisabled: TRL's PPOTrainer turns dropout off in every model it holds, with no option.
func (*PPO) dropoutDisabled() bool { return true }

// DisableDropout reports whether cfg's run trains without dropout: TRL's disable_dropout (DPO and
// KTO by default, GRPO when asked; always for PPO, as TRL's PPOTrainer; SFT and reward models keep
// theirs, having no such option in TRL).
func DisableDropout(cfg Config) bool {
	d, ok := cfg.(dropoutSetting)
	return ok && d.dropoutDisabled()
}

// New returns the default configuration of a method ("sft", "dpo", "kto", "grpo", "reward").
func New(method string) (Config, error) {
	switch method {
	case "sft":
		return DefaultSFT(), nil
	case "dpo":
		return DefaultDPO(), nil
	case "kto":
		return DefaultKTO(), nil
	case "grpo":
		return DefaultGRPO(), nil
	case "reward":
		return DefaultReward(), nil
	case "ppo":
		return DefaultPPO(), nil
	}
	return nil, fmt.Errorf("unknown training method %q; valid: sft, dpo, kto, grpo, reward, ppo", method)
}
