package config

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// ValidateLengths checks a preference method's max_length, max_prompt_length and
// max_completion_length.
func ValidateLengths(c Config, maxLength, maxPromptLength, maxCompletionLength int) error {
	switch {
	case maxCompletionLength < 0:
		return Bad(c, "max_completion_length", fmt.Sprintf("must be ≥ 0 (0 = no limit), got %d", maxCompletionLength))
	case maxLength < 1:
		return Bad(c, "max_length", fmt.Sprintf("must be ≥ 1, got %d", maxLength))
	case maxPromptLength < 1:
		return Bad(c, "max_prompt_length", fmt.Sprintf("must be ≥ 1, got %d", maxPromptLength))
	case maxPromptLength >= maxLength:
		return Bad(c, "max_prompt_length", fmt.Sprintf("(%d) must be < max_length (%d) to leave room for the completion", maxPromptLength, maxLength))
	}
	return nil
}

// ValidateCommon checks the choices of every option and the shared training options.
func ValidateCommon(c Config) error {
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
				return Bad(c, f.Key, fmt.Sprintf("must be one of %s, got %q", strings.Join(f.Enum, ", "), v))
			}
		}
	}
	t := c.Common()
	pos := func(key string, v float64) error {
		if !(v > 0) || math.IsInf(v, 0) {
			return Bad(c, key, fmt.Sprintf("must be > 0, got %g", v))
		}
		return nil
	}
	switch {
	case t.Model == "":
		return Bad(c, "model_name_or_path", "is required")
	case t.Dataset == "" && len(t.Datasets) == 0:
		return Bad(c, "dataset_name", "is required")
	case t.Dataset != "" && len(t.Datasets) > 0:
		return Bad(c, "dataset_name", "and datasets (a mixture) are both given: give one")
	case t.OutputDir == "":
		return Bad(c, "output_dir", "is required")
	case t.PerDeviceTrainBatchSize < 1:
		return Bad(c, "per_device_train_batch_size", fmt.Sprintf("must be ≥ 1, got %d", t.PerDeviceTrainBatchSize))
	case t.GradientAccumulationSteps < 1:
		return Bad(c, "gradient_accumulation_steps", fmt.Sprintf("must be ≥ 1, got %d", t.GradientAccumulationSteps))
	case t.Devices < 0:
		return Bad(c, "devices", fmt.Sprintf("must be ≥ 1 (or 0: every device of the backend), got %d", t.Devices))
	// HF's Trainer: max_steps > 0 is the number of steps; any other value (-1 by default, 0, -5)
	// means num_train_epochs (TotalSteps).
	case t.MaxSteps <= 0 && (!(t.NumTrainEpochs > 0) || math.IsInf(t.NumTrainEpochs, 0)):
		return Bad(c, "num_train_epochs", fmt.Sprintf("must be > 0 and finite when max_steps ≤ 0 (max_steps %d: train num_train_epochs passes), got %g", t.MaxSteps, t.NumTrainEpochs))
	case !(t.WarmupRatio >= 0 && t.WarmupRatio <= 1):
		return Bad(c, "warmup_ratio", fmt.Sprintf("must be in [0, 1], got %g", t.WarmupRatio))
	case t.WarmupSteps < 0:
		return Bad(c, "warmup_steps", fmt.Sprintf("must be ≥ 0, got %d", t.WarmupSteps))
	case !(t.GPUMemoryFraction >= 0 && t.GPUMemoryFraction <= 1):
		return Bad(c, "gpu_memory_fraction", fmt.Sprintf("must be in (0, 1], or 0 for the default, got %g", t.GPUMemoryFraction))
	case !(t.MaxGradNorm >= 0) || math.IsInf(t.MaxGradNorm, 0):
		return Bad(c, "max_grad_norm", fmt.Sprintf("must be ≥ 0 (0 = no clipping), got %g", t.MaxGradNorm))
	case !(t.WeightDecay >= 0) || math.IsInf(t.WeightDecay, 0):
		return Bad(c, "weight_decay", fmt.Sprintf("must be ≥ 0, got %g", t.WeightDecay))
	case !(t.AdamBeta1 >= 0 && t.AdamBeta1 < 1):
		return Bad(c, "adam_beta1", fmt.Sprintf("must be in [0, 1), got %g", t.AdamBeta1))
	case !(t.AdamBeta2 >= 0 && t.AdamBeta2 < 1):
		return Bad(c, "adam_beta2", fmt.Sprintf("must be in [0, 1), got %g", t.AdamBeta2))
	case t.LoggingSteps < 1:
		return Bad(c, "logging_steps", fmt.Sprintf("must be ≥ 1, got %d", t.LoggingSteps))
	case t.SaveSteps < 0:
		return Bad(c, "save_steps", fmt.Sprintf("must be ≥ 0 (0 = only at the end), got %d", t.SaveSteps))
	case t.SaveTotalLimit < 0:
		return Bad(c, "save_total_limit", fmt.Sprintf("must be ≥ 0 (0 = keep all), got %d", t.SaveTotalLimit))
	case t.Resume && t.ResumeFromCheckpoint != "":
		return Bad(c, "resume", "and resume_from_checkpoint are exclusive: give one")
	case t.OverwriteOutputDir && (t.Resume || t.ResumeFromCheckpoint != ""):
		return Bad(c, "overwrite_output_dir", "removes the run that resume continues: give one")
	case t.EvalStrategy != "no" && t.EvalDataset == "" && !t.HasSplits():
		return Bad(c, "eval_strategy", fmt.Sprintf("%s needs an eval_dataset (--eval-dataset), or a dataset_name with a %s split (dataset_test_split)", t.EvalStrategy, t.DatasetTestSplit))
	case t.EvalOnStart && t.EvalDataset == "" && !t.HasSplits():
		return Bad(c, "eval_on_start", fmt.Sprintf("needs an eval_dataset (--eval-dataset), or a dataset_name with a %s split (dataset_test_split)", t.DatasetTestSplit))
	case t.EvalSteps < 0:
		return Bad(c, "eval_steps", fmt.Sprintf("must be ≥ 0 (0 = logging_steps), got %d", t.EvalSteps))
	case t.PerDeviceEvalBatchSize < 1:
		return Bad(c, "per_device_eval_batch_size", fmt.Sprintf("must be ≥ 1, got %d", t.PerDeviceEvalBatchSize))
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
			return Bad(c, "report_to", fmt.Sprintf("none cannot be combined with other integrations, got %s", strings.Join(list, ",")))
		case v == "none" || v == "tensorboard" || v == "all":
		case slices.Contains(hfIntegrations, v):
			return Bad(c, "report_to", fmt.Sprintf("%s is not available in posttrain (it reports to a service or library posttrain has not, and training runs offline); use tensorboard (event files under output_dir/runs/) or none", v))
		default:
			return Bad(c, "report_to", fmt.Sprintf("must be none, tensorboard or all (a list of them), got %q", v))
		}
	}
	return nil
}

// ValidateFinite refuses NaN and ±Inf in any float option, after the options' own checks (which
// give the more precise messages): a NaN slips through range checks written as comparisons, and
// the YAML and flag parsers both accept "NaN" and "Inf".
func ValidateFinite(c Config) error {
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
				return Bad(c, f.Key, fmt.Sprintf("must be a finite number, got %g", v))
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
		return Bad(c, "tensor_parallel", "and --fsdp split the same weights two ways: give one of them")
	case t.TensorParallel && pureGo:
		return Bad(c, "tensor_parallel", fmt.Sprintf("needs an XLA backend (its SPMD partitioner splits the projections); the backend %s has 1 device", backendName))
	case t.FSDP && pureGo:
		return Bad(c, "fsdp", fmt.Sprintf("needs an XLA backend (its SPMD partitioner splits the state); the backend %s has 1 device", backendName))
	case n == 0 && (oneByDefault || pureGo):
		n = 1
	case n == 0:
		n = have
	case n > have:
		return Bad(c, "devices", fmt.Sprintf("%d: the backend %s has %d device%s", n, backendName, have, map[bool]string{true: "", false: "s"}[have == 1]))
	}
	if t.TensorParallel && n < 2 {
		return Bad(c, "tensor_parallel", fmt.Sprintf("splits the projections over several devices: give --devices ≥ 2 (the backend %s has %d)", backendName, have))
	}
	if t.FSDP && n < 2 {
		return Bad(c, "fsdp", fmt.Sprintf("splits the state over several devices: give --devices ≥ 2 (the backend %s has %d)", backendName, have))
	}
	if n == 1 {
		n = 0
	}
	t.Devices = n
	return nil
}
