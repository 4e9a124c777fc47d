package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Validate implements Config.
func (c *SFT) Validate() error {
	if err := validateCommon(c); err != nil {
		return err
	}
	if c.MaxLength < 1 && c.Packing {
		return bad(c, "max_length", fmt.Sprintf("must be ≥ 1 with packing (it is the length of a packed row), got %d", c.MaxLength))
	}
	if c.MaxLength < 1 {
		return bad(c, "max_length", fmt.Sprintf("must be ≥ 1, got %d", c.MaxLength))
	}
	if c.DatasetTextField == "" {
		return bad(c, "dataset_text_field", "is empty: name the column of the text rows (TRL's default: text)")
	}
	return validateFinite(c)
}

// Validate implements Config.
func (c *DPO) Validate() error {
	if slices.Contains(c.LossType, "bco_pair") {
		return bad(c, "loss_type", "bco_pair is not implemented: its running mean of the rewards (TRL's RunningMoments) is trainer state that TRL updates on every batch, eval included, and does not checkpoint")
	}
	if err := validateCommon(c); err != nil {
		return err
	}
	switch {
	case len(c.LossType) == 0:
		return bad(c, "loss_type", "is empty: name at least one loss type")
	case len(c.LossWeights) > 0 && len(c.LossWeights) != len(c.LossType):
		return bad(c, "loss_weights", fmt.Sprintf("has %d weights for %d loss types", len(c.LossWeights), len(c.LossType)))
	case !(c.Beta > 0) || math.IsInf(c.Beta, 0):
		return bad(c, "beta", fmt.Sprintf("must be > 0, got %g", c.Beta))
	case !(c.LabelSmoothing >= 0 && c.LabelSmoothing < 0.5):
		return bad(c, "label_smoothing", fmt.Sprintf("must be in [0, 0.5), got %g", c.LabelSmoothing))
	case !(c.DiscopopTau > 0) || math.IsInf(c.DiscopopTau, 0):
		return bad(c, "discopop_tau", fmt.Sprintf("must be > 0, got %g", c.DiscopopTau))
	case !(c.RPOAlpha >= 0) || math.IsInf(c.RPOAlpha, 0):
		return bad(c, "rpo_alpha", fmt.Sprintf("must be ≥ 0 (0 = off), got %g", c.RPOAlpha))
	case !(c.LDAlpha >= 0) || math.IsInf(c.LDAlpha, 0):
		return bad(c, "ld_alpha", fmt.Sprintf("must be ≥ 0 (0 = off), got %g", c.LDAlpha))
	case c.FDivergenceType == "alpha_divergence" && (c.FAlphaDivergenceCoef == 0 || math.IsNaN(c.FAlphaDivergenceCoef) || math.IsInf(c.FAlphaDivergenceCoef, 0)):
		return bad(c, "f_alpha_divergence_coef", fmt.Sprintf("must be finite and ≠ 0 with f_divergence_type alpha_divergence (the logits divide by it), got %g", c.FAlphaDivergenceCoef))
	}
	for _, w := range c.LossWeights {
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return bad(c, "loss_weights", fmt.Sprintf("must be finite, got %g", w))
		}
	}
	// TRL warns and ignores label_smoothing for the other types; posttrain refuses instead.
	smoothed := []string{"sigmoid", "robust", "exo_pair", "aot", "aot_pair", "sft"}
	for _, t := range c.LossType {
		if c.LabelSmoothing > 0 && !slices.Contains(smoothed, t) {
			return bad(c, "label_smoothing", fmt.Sprintf("applies to loss_type sigmoid, robust, exo_pair, aot and aot_pair only, not %s", t))
		}
	}
	if err := validateLengths(c, c.MaxLength, c.MaxPromptLength, c.MaxCompletionLength); err != nil {
		return err
	}
	return validateFinite(c)
}

// Validate implements Config.
func (c *KTO) Validate() error {
	if err := validateCommon(c); err != nil {
		return err
	}
	switch {
	case !(c.Beta > 0) || math.IsInf(c.Beta, 0):
		return bad(c, "beta", fmt.Sprintf("must be > 0, got %g", c.Beta))
	case !(c.DesirableWeight > 0) || math.IsInf(c.DesirableWeight, 0):
		return bad(c, "desirable_weight", fmt.Sprintf("must be > 0, got %g", c.DesirableWeight))
	case !(c.UndesirableWeight > 0) || math.IsInf(c.UndesirableWeight, 0):
		return bad(c, "undesirable_weight", fmt.Sprintf("must be > 0, got %g", c.UndesirableWeight))
	}
	if err := validateLengths(c, c.MaxLength, c.MaxPromptLength, c.MaxCompletionLength); err != nil {
		return err
	}
	return validateFinite(c)
}

// Validate implements Config.
func (c *GRPO) Validate() error {
	if err := validateCommon(c); err != nil {
		return err
	}
	spg := c.StepsPerGeneration
	if spg == 0 {
		spg = c.GradientAccumulationSteps
	}
	epsHigh := c.EpsilonHigh
	if epsHigh == 0 {
		epsHigh = c.Epsilon
	}
	mb := c.MicroBatch() // per_device_train_batch_size × devices
	switch {
	case c.FSDP:
		return bad(c, "fsdp", "is not for grpo, which generates with the whole weights on each device: use --devices N without it (data parallel)")
	case c.TensorParallel:
		return bad(c, "tensor_parallel", "is not for grpo, which generates with the whole weights on each device: use --devices N without it (data parallel)")
	case len(c.RewardFuncs) == 0 && len(c.RewardModels) == 0:
		return bad(c, "reward_funcs", "is required: name at least one reward function (or give a reward model, --reward-model)")
	case len(c.RewardWeights) > 0 && len(c.RewardModels) == 0 && len(c.RewardWeights) != len(c.RewardFuncs):
		return bad(c, "reward_weights", fmt.Sprintf("has %d weights for %d reward functions", len(c.RewardWeights), len(c.RewardFuncs)))
	case len(c.RewardWeights) > 0 && len(c.RewardWeights) != len(c.RewardModels)+len(c.RewardFuncs):
		return bad(c, "reward_weights", fmt.Sprintf("has %d weights for %d reward models and %d reward functions (models first)", len(c.RewardWeights), len(c.RewardModels), len(c.RewardFuncs)))
	case c.NumGenerations < 2:
		return bad(c, "num_generations", fmt.Sprintf("must be ≥ 2 (advantages need a group), got %d", c.NumGenerations))
	case c.MaxPromptLength < 1:
		return bad(c, "max_prompt_length", fmt.Sprintf("must be ≥ 1, got %d", c.MaxPromptLength))
	case c.MaxCompletionLength < 1:
		return bad(c, "max_completion_length", fmt.Sprintf("must be ≥ 1, got %d", c.MaxCompletionLength))
	case !(c.Temperature > 0) || math.IsInf(c.Temperature, 0):
		return bad(c, "temperature", fmt.Sprintf("must be > 0, got %g", c.Temperature))
	case !(c.TopP > 0 && c.TopP <= 1):
		return bad(c, "top_p", fmt.Sprintf("must be in (0, 1], got %g", c.TopP))
	case c.TopK < 0:
		return bad(c, "top_k", fmt.Sprintf("must be ≥ 0, got %d", c.TopK))
	case !(c.MinP >= 0 && c.MinP <= 1):
		return bad(c, "min_p", fmt.Sprintf("must be in [0, 1] (0 = off), got %g", c.MinP))
	case !(c.RepetitionPenalty > 0) || math.IsInf(c.RepetitionPenalty, 0):
		return bad(c, "repetition_penalty", fmt.Sprintf("must be > 0 (1 = off), got %g", c.RepetitionPenalty))
	case !(c.Beta >= 0) || math.IsInf(c.Beta, 0):
		return bad(c, "beta", fmt.Sprintf("must be ≥ 0, got %g", c.Beta))
	case !(c.Epsilon > 0) || math.IsInf(c.Epsilon, 0):
		return bad(c, "epsilon", fmt.Sprintf("must be > 0, got %g", c.Epsilon))
	case !(c.EpsilonHigh >= 0) || math.IsInf(c.EpsilonHigh, 0):
		return bad(c, "epsilon_high", fmt.Sprintf("must be ≥ 0 (0 = epsilon), got %g", c.EpsilonHigh))
	case c.Delta != 0 && !(c.Delta > 1+epsHigh && !math.IsInf(c.Delta, 0)):
		return bad(c, "delta", fmt.Sprintf("must be 0 (off) or > 1 + epsilon_high = %g, got %g", 1+epsHigh, c.Delta))
	case !(c.TopEntropyQuantile >= 0 && c.TopEntropyQuantile <= 1):
		return bad(c, "top_entropy_quantile", fmt.Sprintf("must be in [0, 1] (1 = all tokens), got %g", c.TopEntropyQuantile))
	case c.SyncRefModel && !(c.RefModelMixupAlpha >= 0 && c.RefModelMixupAlpha <= 1):
		return bad(c, "ref_model_mixup_alpha", fmt.Sprintf("must be in [0, 1] with sync_ref_model, got %g", c.RefModelMixupAlpha))
	case c.SyncRefModel && c.RefModelSyncSteps < 1:
		return bad(c, "ref_model_sync_steps", fmt.Sprintf("must be ≥ 1 with sync_ref_model, got %d", c.RefModelSyncSteps))
	case c.NumIterations < 1:
		return bad(c, "num_iterations", fmt.Sprintf("must be ≥ 1, got %d", c.NumIterations))
	case c.StepsPerGeneration < 0:
		return bad(c, "steps_per_generation", fmt.Sprintf("must be ≥ 0 (0 = gradient_accumulation_steps), got %d", c.StepsPerGeneration))
	case !tokensAtMost(mb, spg, c.MaxPromptLength+c.MaxCompletionLength):
		// Each option is bounded alone; the generation batch is their product (its KV cache).
		devices := ""
		if c.DeviceCount() > 1 {
			devices = fmt.Sprintf("× devices %d ", c.DeviceCount())
		}
		return bad(c, "per_device_train_batch_size", fmt.Sprintf("%s× steps_per_generation × (max_prompt_length + max_completion_length) = %d × %d × (%d + %d) is more than %d tokens in one generation batch",
			devices, mb, spg, c.MaxPromptLength, c.MaxCompletionLength, MaxCount))
	case c.Evaluates() && !tokensAtMost(c.PerDeviceEvalBatchSize, c.MaxPromptLength+c.MaxCompletionLength):
		return bad(c, "per_device_eval_batch_size", fmt.Sprintf("× (max_prompt_length + max_completion_length) = %d × (%d + %d) is more than %d tokens in one eval generation batch",
			c.PerDeviceEvalBatchSize, c.MaxPromptLength, c.MaxCompletionLength, MaxCount))
	case (mb*spg)%c.NumGenerations != 0 && c.DeviceCount() == 1:
		return bad(c, "num_generations", fmt.Sprintf(
			"(%d) must divide the generation batch per_device_train_batch_size × steps_per_generation = %d × %d = %d",
			c.NumGenerations, c.PerDeviceTrainBatchSize, spg, mb*spg))
	case (mb*spg)%c.NumGenerations != 0:
		return bad(c, "num_generations", fmt.Sprintf(
			"(%d) must divide the generation batch per_device_train_batch_size × devices × steps_per_generation = %d × %d × %d = %d",
			c.NumGenerations, c.PerDeviceTrainBatchSize, c.DeviceCount(), spg, mb*spg))
	case c.Evaluates() && c.PerDeviceEvalBatchSize%c.NumGenerations != 0:
		// TRL (GRPOConfig.__post_init__): the global eval batch must hold whole groups, since the
		// eval sampler repeats each prompt num_generations times and advantages are per group.
		return bad(c, "per_device_eval_batch_size", fmt.Sprintf(
			"(%d) must be divisible by num_generations (%d): an eval batch holds whole groups of a prompt's completions",
			c.PerDeviceEvalBatchSize, c.NumGenerations))
	}
	for _, w := range c.RewardWeights {
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return bad(c, "reward_weights", fmt.Sprintf("must be finite, got %g", w))
		}
	}
	for _, name := range c.RewardFuncs {
		if strings.TrimSpace(name) == "" {
			return bad(c, "reward_funcs", "contains an empty name")
		}
	}
	return validateFinite(c)
}

func validateLengths(c Config, maxLength, maxPromptLength, maxCompletionLength int) error {
	switch {
	case maxCompletionLength < 0:
		return bad(c, "max_completion_length", fmt.Sprintf("must be ≥ 0 (0 = no limit), got %d", maxCompletionLength))
	case maxLength < 1:
		return bad(c, "max_length", fmt.Sprintf("must be ≥ 1, got %d", maxLength))
	case maxPromptLength < 1:
		return bad(c, "max_prompt_length", fmt.Sprintf("must be ≥ 1, got %d", maxPromptLength))
	case maxPromptLength >= maxLength:
		return bad(c, "max_prompt_length", fmt.Sprintf("(%d) must be < max_length (%d) to leave room for the completion", maxPromptLength, maxLength))
	}
	return nil
}

// validateCommon checks the choices of every option and the shared training options.
func validateCommon(c Config) error {
	if err := validateCounts(c); err != nil {
		return err
	}
	for _, f := range fields(c) {
		if f.Enum == nil {
			continue
		}
		values := []string{f.Value.String()}
		if list, ok := f.Value.Interface().([]string); ok {
			values = list // a list option: every entry must be a choice
		}
		for _, v := range values {
			if !slices.Contains(f.Enum, v) {
				return bad(c, f.Key, fmt.Sprintf("must be one of %s, got %q", strings.Join(f.Enum, ", "), v))
			}
		}
	}
	t := c.Common()
	pos := func(key string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return bad(c, key, fmt.Sprintf("must be > 0, got %g", v))
		}
		return nil
	}
	switch {
	case t.Model == "":
		return bad(c, "model_name_or_path", "is required")
	case t.Dataset == "":
		return bad(c, "dataset_name", "is required")
	case t.OutputDir == "":
		return bad(c, "output_dir", "is required")
	case t.PerDeviceTrainBatchSize < 1:
		return bad(c, "per_device_train_batch_size", fmt.Sprintf("must be ≥ 1, got %d", t.PerDeviceTrainBatchSize))
	case t.GradientAccumulationSteps < 1:
		return bad(c, "gradient_accumulation_steps", fmt.Sprintf("must be ≥ 1, got %d", t.GradientAccumulationSteps))
	case t.Devices < 0:
		return bad(c, "devices", fmt.Sprintf("must be ≥ 1 (or 0: every device of the backend), got %d", t.Devices))
	// HF's Trainer: max_steps > 0 is the number of steps; any other value (-1 by default, 0, -5)
	// means num_train_epochs (TotalSteps).
	case t.MaxSteps <= 0 && (!(t.NumTrainEpochs > 0) || math.IsInf(t.NumTrainEpochs, 0)):
		return bad(c, "num_train_epochs", fmt.Sprintf("must be > 0 and finite when max_steps ≤ 0 (max_steps %d: train num_train_epochs passes), got %g", t.MaxSteps, t.NumTrainEpochs))
	case !(t.WarmupRatio >= 0 && t.WarmupRatio <= 1):
		return bad(c, "warmup_ratio", fmt.Sprintf("must be in [0, 1], got %g", t.WarmupRatio))
	case t.WarmupSteps < 0:
		return bad(c, "warmup_steps", fmt.Sprintf("must be ≥ 0, got %d", t.WarmupSteps))
	case !(t.MaxGradNorm >= 0) || math.IsInf(t.MaxGradNorm, 0):
		return bad(c, "max_grad_norm", fmt.Sprintf("must be ≥ 0 (0 = no clipping), got %g", t.MaxGradNorm))
	case !(t.WeightDecay >= 0) || math.IsInf(t.WeightDecay, 0):
		return bad(c, "weight_decay", fmt.Sprintf("must be ≥ 0, got %g", t.WeightDecay))
	case !(t.AdamBeta1 >= 0 && t.AdamBeta1 < 1):
		return bad(c, "adam_beta1", fmt.Sprintf("must be in [0, 1), got %g", t.AdamBeta1))
	case !(t.AdamBeta2 >= 0 && t.AdamBeta2 < 1):
		return bad(c, "adam_beta2", fmt.Sprintf("must be in [0, 1), got %g", t.AdamBeta2))
	case t.LoggingSteps < 1:
		return bad(c, "logging_steps", fmt.Sprintf("must be ≥ 1, got %d", t.LoggingSteps))
	case t.SaveSteps < 0:
		return bad(c, "save_steps", fmt.Sprintf("must be ≥ 0 (0 = only at the end), got %d", t.SaveSteps))
	case t.SaveTotalLimit < 0:
		return bad(c, "save_total_limit", fmt.Sprintf("must be ≥ 0 (0 = keep all), got %d", t.SaveTotalLimit))
	case t.Resume && t.ResumeFromCheckpoint != "":
		return bad(c, "resume", "and resume_from_checkpoint are exclusive: give one")
	case t.OverwriteOutputDir && (t.Resume || t.ResumeFromCheckpoint != ""):
		return bad(c, "overwrite_output_dir", "removes the run that resume continues: give one")
	case t.EvalStrategy != "no" && t.EvalDataset == "":
		return bad(c, "eval_strategy", fmt.Sprintf("%s needs an eval_dataset (--eval-dataset)", t.EvalStrategy))
	case t.EvalOnStart && t.EvalDataset == "":
		return bad(c, "eval_on_start", "needs an eval_dataset (--eval-dataset)")
	case t.EvalSteps < 0:
		return bad(c, "eval_steps", fmt.Sprintf("must be ≥ 0 (0 = logging_steps), got %d", t.EvalSteps))
	case t.PerDeviceEvalBatchSize < 1:
		return bad(c, "per_device_eval_batch_size", fmt.Sprintf("must be ≥ 1, got %d", t.PerDeviceEvalBatchSize))
	}
	if err := pos("learning_rate", t.LearningRate); err != nil {
		return err
	}
	if err := validateOverride(c); err != nil {
		return err
	}
	if err := validateReportTo(c); err != nil {
		return err
	}
	if err := validatePEFT(c); err != nil {
		return err
	}
	return pos("adam_epsilon", t.AdamEpsilon)
}

// hfIntegrations are the other report_to names of HF's Trainer (integration_utils.py,
// INTEGRATION_TO_CALLBACK): each sends the metrics to a service or library posttrain has not.
var hfIntegrations = []string{"azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive", "flyte", "mlflow", "neptune", "swanlab", "trackio", "wandb"}

// validateReportTo accepts report_to none, tensorboard or all (HF's every installed integration:
// tensorboard here), as one value or a list; none cannot be combined with another.
func validateReportTo(c Config) error {
	list := c.Common().ReportTo
	for _, v := range list {
		switch {
		case v == "none" && len(list) > 1:
			return bad(c, "report_to", fmt.Sprintf("none cannot be combined with other integrations, got %s", strings.Join(list, ",")))
		case v == "none" || v == "tensorboard" || v == "all":
		case slices.Contains(hfIntegrations, v):
			return bad(c, "report_to", fmt.Sprintf("%s is not available in posttrain (it reports to a service or library posttrain has not, and training runs offline); use tensorboard (event files under output_dir/runs/) or none", v))
		default:
			return bad(c, "report_to", fmt.Sprintf("must be none, tensorboard or all (a list of them), got %q", v))
		}
	}
	return nil
}

// validateFinite refuses NaN and ±Inf in any float option, after the options' own checks (which
// give the more precise messages): a NaN slips through range checks written as comparisons, and
// the YAML and flag parsers both accept "NaN" and "Inf".
func validateFinite(c Config) error {
	for _, f := range fields(c) {
		var values []float64
		switch v := f.Value.Interface().(type) {
		case float64:
			values = []float64{v}
		case []float64:
			values = v
		}
		for _, v := range values {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return bad(c, f.Key, fmt.Sprintf("must be a finite number, got %g", v))
			}
		}
	}
	return nil
}

// ResolveDevices sets devices for a backend of have devices: 0 (the default) becomes have, or 1
// when oneByDefault (the pure-Go backend; XLA's CPU plugin, whose devices share the same cores;
// the methods that generate), and a resolved 1 is stored as 0 (training_args.yaml of a
// one-device run is unchanged). A count the backend does not have, and fsdp on the pure-Go
// backend or on one device, are refused, naming the flag.
func ResolveDevices(c Config, backendName string, have int, pureGo, oneByDefault bool) error {
	t := c.Common()
	n := t.Devices
	switch {
	case t.TensorParallel && t.FSDP:
		return bad(c, "tensor_parallel", "and --fsdp split the same weights two ways: give one of them")
	case t.TensorParallel && pureGo:
		return bad(c, "tensor_parallel", fmt.Sprintf("needs an XLA backend (its SPMD partitioner splits the projections); the backend %s has 1 device", backendName))
	case t.FSDP && pureGo:
		return bad(c, "fsdp", fmt.Sprintf("needs an XLA backend (its SPMD partitioner splits the state); the backend %s has 1 device", backendName))
	case n == 0 && (oneByDefault || pureGo):
		n = 1
	case n == 0:
		n = have
	case n > have:
		return bad(c, "devices", fmt.Sprintf("%d: the backend %s has %d device%s", n, backendName, have, map[bool]string{true: "", false: "s"}[have == 1]))
	}
	if t.TensorParallel && n < 2 {
		return bad(c, "tensor_parallel", fmt.Sprintf("splits the projections over several devices: give --devices ≥ 2 (the backend %s has %d)", backendName, have))
	}
	if t.FSDP && n < 2 {
		return bad(c, "fsdp", fmt.Sprintf("splits the state over several devices: give --devices ≥ 2 (the backend %s has %d)", backendName, have))
	}
	if n == 1 {
		n = 0
	}
	t.Devices = n
	return nil
}
