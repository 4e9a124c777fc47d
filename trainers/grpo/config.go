package grpo

import (
	"fmt"
	"math"
	"strings"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Config is TRL's GRPOConfig subset that posttrain implements. per_device_train_batch_size counts
// completions, not prompts (TRL #2776).
type Config struct {
	config.Training          `yaml:",inline"`
	RewardFuncs              []string  `yaml:"reward_funcs" flag:"reward" usage:"reward function(s), repeated or comma-separated: a built-in name (posttrain data rewards), FILE.py:FUNC or a dotted module.func (a Python function written for TRL's GRPOTrainer, called in a worker process)"`
	RewardURLs               []string  `yaml:"reward_url" usage:"reward server(s), repeated: each batch is POSTed as JSON (prompts, completions, completion_ids, trainer_state, query and the dataset's columns) and answered {\"rewards\": [...]}; after reward_funcs"`
	RewardPython             string    `yaml:"reward_python" resume:"free" usage:"the Python interpreter of the reward worker (default: python3 on PATH)"`
	RewardTimeout            float64   `yaml:"reward_timeout" resume:"free" usage:"seconds one reward call (Python or URL) may take before the run stops"`
	RewardModels             []string  `yaml:"reward_model_name_or_path" input:"path" flag:"reward-model" usage:"reward model checkpoint(s) (*ForSequenceClassification, num_labels 1, e.g. posttrain reward's output), comma-separated or repeated: each scores prompt+completion through its own chat template and counts as a reward function named after its directory, before reward_funcs (TRL's grpo.py order)"`
	RewardWeights            []float64 `yaml:"reward_weights" usage:"weight of each reward model, then of each reward function, then of each reward URL (default: all 1)"`
	Tools                    []string  `yaml:"tools" usage:"tools the model may call during generation: a built-in one (calculator), FILE.py:FUNC[,FUNC…] or a dotted module.func (Python functions, run in a worker; their schemas from signature and docstring as transformers' get_json_schema): their schemas are rendered into the prompts, each completion's tool calls run and their results appended as tool turns (masked out of the loss) before generation continues (TRL 1.x's tools=)"`
	Environment              string    `yaml:"environment" usage:"FILE.py:Class or a dotted module.Class: TRL 1.x's environment_factory, one instance per rollout, reset with the rollout's dataset row (a string it returns is appended to the prompt's last message), its public methods the rollout's tools, its get_reward() (where defined) one more reward, logged under the class's name"`
	EnvironmentURL           string    `yaml:"environment_url" usage:"an OpenEnv server (http://HOST:PORT): one session per rollout over its /ws, reset with the rollout's dataset row (its observation appended to the prompt's last message), its action schema the rollout's one tool, step, and the last reward it reports one more reward, logged under its name"`
	ToolTimeout              float64   `yaml:"tool_timeout" resume:"free" usage:"seconds one Python tool call (or an environment server's answer) may take; past it the call fails ({'error': …} as its result) and the tool worker is restarted"`
	MaxToolCallingIterations int       `yaml:"max_tool_calling_iterations" usage:"most tool-calling turns per completion; 0 = no limit (TRL's None): a completion ends at a turn without calls or at max_completion_length"`
	NumGenerations           int       `yaml:"num_generations" usage:"completions sampled per prompt (group size G)"`
	MaxPromptLength          int       `yaml:"max_prompt_length" usage:"truncate prompts (left) to this many tokens"`
	MaxCompletionLength      int       `yaml:"max_completion_length" usage:"maximum generated tokens per completion"`
	Temperature              float64   `yaml:"temperature" usage:"sampling temperature (log-probs are scored at it too)"`
	TopP                     float64   `yaml:"top_p" usage:"nucleus sampling mass in (0, 1]; 1 = off"`
	TopK                     int       `yaml:"top_k" usage:"top-k sampling; 0 = off"`
	MinP                     float64   `yaml:"min_p" usage:"min-p sampling in [0, 1]: keep tokens with probability ≥ min_p × the top one's, after top-k/top-p; 0 = off"`
	RepetitionPenalty        float64   `yaml:"repetition_penalty" usage:"divide positive (multiply negative) logits of tokens already in the prompt or completion by this when sampling; > 1 discourages repeats; 1 = off"`
	DecodeStepsPerCall       int       `yaml:"decode_steps_per_call" usage:"decode steps run per execution of the decode graph (unrolled; the rows are checked for stop tokens after each): fewer host round trips per token on a GPU; the tokens are those of one step per execution; 1 = one"`
	Beta                     float64   `yaml:"beta" usage:"KL coefficient; 0 = no reference model is loaded"`
	Epsilon                  float64   `yaml:"epsilon" usage:"lower clipping range ε of the ratio"`
	EpsilonHigh              float64   `yaml:"epsilon_high" usage:"upper clipping range; 0 = epsilon (DAPO uses 0.28)"`
	Delta                    float64   `yaml:"delta" usage:"two-sided clipping (INTELLECT-2): cap the unclipped ratio at delta, > 1 + epsilon_high; 0 = off"`
	LossType                 string    `yaml:"loss_type" enum:"grpo|bnpo|dr_grpo|dapo|cispo|sapo|luspo|vespo" usage:"the loss: TRL 0.24's token aggregations of the clipped surrogate (grpo, bnpo, dr_grpo, dapo), or TRL 1.x's cispo (capped, detached ratio on REINFORCE), sapo (soft gate), luspo (length-weighted sequence sums) and vespo (gamma-weighted sequence ratio)"`
	DAPONormalizer           string    `yaml:"dapo_normalizer" enum:"generation_batch|per_step" usage:"dapo's divisor: the generation batch's completion tokens on each of its steps (TRL 0.24), or those tokens × gradient_accumulation_steps / steps_per_generation (per_step: TRL 1.x, as its cispo and vespo)"`
	UseBiasCorrectionKL      bool      `yaml:"use_bias_correction_kl" usage:"multiply the KL term by the importance ratio (with its gradient: the unbiased reverse-KL gradient of DeepSeek-V3.2); TRL 1.x's default, off as in TRL 0.24"`
	SAPOTemperaturePos       float64   `yaml:"sapo_temperature_pos" usage:"sapo's temperature τ for positive advantages (TRL 1.x)"`
	SAPOTemperatureNeg       float64   `yaml:"sapo_temperature_neg" usage:"sapo's temperature τ for the other advantages (TRL 1.x)"`
	VESPOKPos                float64   `yaml:"vespo_k_pos" usage:"vespo's gamma weighting exponent k for advantages ≥ 0 (TRL 1.x)"`
	VESPOLambdaPos           float64   `yaml:"vespo_lambda_pos" usage:"vespo's gamma weighting rate λ for advantages ≥ 0 (TRL 1.x)"`
	VESPOKNeg                float64   `yaml:"vespo_k_neg" usage:"vespo's gamma weighting exponent k for negative advantages (TRL 1.x)"`
	VESPOLambdaNeg           float64   `yaml:"vespo_lambda_neg" usage:"vespo's gamma weighting rate λ for negative advantages (TRL 1.x)"`
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
	config.PEFT              `yaml:",inline"`
}

// DefaultConfig returns GRPOConfig's v0.24 defaults.
func DefaultConfig() *Config {
	c := &Config{
		Training: config.DefaultTraining(), PEFT: config.DefaultPEFT(), NumGenerations: 8, MaxPromptLength: 512, MaxCompletionLength: 256,
		Temperature: 1, TopP: 1, RepetitionPenalty: 1, DecodeStepsPerCall: 1, Beta: 0, Epsilon: 0.2, LossType: "dapo", ScaleRewards: "group",
		ImportanceSamplingLevel: "token", Advantage: "grpo", NumIterations: 1, TopEntropyQuantile: 1,
		RefModelMixupAlpha: 0.6, RefModelSyncSteps: 512, RewardTimeout: 300, ToolTimeout: 60,
		DAPONormalizer: "generation_batch", SAPOTemperaturePos: 1.0, SAPOTemperatureNeg: 1.05, VESPOKPos: 2, VESPOLambdaPos: 3, VESPOKNeg: 3, VESPOLambdaNeg: 2,
	}
	c.LearningRate = 1e-6
	c.GradientCheckpointing = true // TRL's default
	return c
}

// Method implements config.Config.
func (*Config) Method() string { return "grpo" }

// Resolve implements config.Config: epsilon_high defaults to epsilon and steps_per_generation to
// gradient_accumulation_steps, as GRPOConfig.__post_init__ does; scale_rewards true/false mean
// group/none, as TRL v0.24 still accepts.
func (c *Config) Resolve() {
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

// Validate implements config.Config.
func (c *Config) Validate() error {
	if err := config.ValidateCommon(c); err != nil {
		return err
	}
	if c.UsePEFT && c.SyncRefModel && c.Beta != 0 {
		return config.Bad(c, "sync_ref_model", "needs a reference model of its own, which use_peft (--use-peft) does not keep: the reference is the base model with the adapter disabled")
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
		return config.Bad(c, "fsdp", "is not for grpo, which generates with the whole weights on each device: use --devices N without it (data parallel)")
	case c.TensorParallel:
		return config.Bad(c, "tensor_parallel", "is not for grpo, which generates with the whole weights on each device: use --devices N without it (data parallel)")
	case len(c.RewardFuncs) == 0 && len(c.RewardModels) == 0 && len(c.RewardURLs) == 0 && c.Environment == "" && c.EnvironmentURL == "":
		return config.Bad(c, "reward_funcs", "is required: name at least one reward function (or give a reward model, --reward-model, a reward server, --reward-url, or an environment with get_reward, --environment, or an environment server, --environment-url)")
	case c.Environment != "" && c.EnvironmentURL != "":
		return config.Bad(c, "environment_url", "and environment (--environment) name two environments: give one")
	case len(c.RewardWeights) > 0 && len(c.RewardModels) == 0 && len(c.RewardURLs) == 0 && len(c.RewardWeights) != len(c.RewardFuncs):
		return config.Bad(c, "reward_weights", fmt.Sprintf("has %d weights for %d reward functions", len(c.RewardWeights), len(c.RewardFuncs)))
	case len(c.RewardWeights) > 0 && len(c.RewardURLs) == 0 && len(c.RewardWeights) != len(c.RewardModels)+len(c.RewardFuncs):
		return config.Bad(c, "reward_weights", fmt.Sprintf("has %d weights for %d reward models and %d reward functions (models first)", len(c.RewardWeights), len(c.RewardModels), len(c.RewardFuncs)))
	case len(c.RewardWeights) > 0 && len(c.RewardWeights) != len(c.RewardModels)+len(c.RewardFuncs)+len(c.RewardURLs):
		return config.Bad(c, "reward_weights", fmt.Sprintf("has %d weights for %d reward models, %d reward functions and %d reward URLs (in that order)", len(c.RewardWeights), len(c.RewardModels), len(c.RewardFuncs), len(c.RewardURLs)))
	case c.LossType == "sapo" && (!(c.SAPOTemperaturePos > 0) || !(c.SAPOTemperatureNeg > 0)):
		return config.Bad(c, "sapo_temperature_pos", fmt.Sprintf("and sapo_temperature_neg must be > 0, got %g and %g", c.SAPOTemperaturePos, c.SAPOTemperatureNeg))
	case !(c.RewardTimeout > 0):
		return config.Bad(c, "reward_timeout", fmt.Sprintf("must be > 0 seconds, got %g", c.RewardTimeout))
	case c.NumGenerations < 2:
		return config.Bad(c, "num_generations", fmt.Sprintf("must be ≥ 2 (advantages need a group), got %d", c.NumGenerations))
	case c.MaxPromptLength < 1:
		return config.Bad(c, "max_prompt_length", fmt.Sprintf("must be ≥ 1, got %d", c.MaxPromptLength))
	case c.MaxCompletionLength < 1:
		return config.Bad(c, "max_completion_length", fmt.Sprintf("must be ≥ 1, got %d", c.MaxCompletionLength))
	case !(c.Temperature > 0) || math.IsInf(c.Temperature, 0):
		return config.Bad(c, "temperature", fmt.Sprintf("must be > 0, got %g", c.Temperature))
	case !(c.TopP > 0 && c.TopP <= 1):
		return config.Bad(c, "top_p", fmt.Sprintf("must be in (0, 1], got %g", c.TopP))
	case c.TopK < 0:
		return config.Bad(c, "top_k", fmt.Sprintf("must be ≥ 0, got %d", c.TopK))
	case !(c.MinP >= 0 && c.MinP <= 1):
		return config.Bad(c, "min_p", fmt.Sprintf("must be in [0, 1] (0 = off), got %g", c.MinP))
	case !(c.RepetitionPenalty > 0) || math.IsInf(c.RepetitionPenalty, 0):
		return config.Bad(c, "repetition_penalty", fmt.Sprintf("must be > 0 (1 = off), got %g", c.RepetitionPenalty))
	case !(c.ToolTimeout > 0):
		return config.Bad(c, "tool_timeout", fmt.Sprintf("must be > 0 seconds, got %g", c.ToolTimeout))
	case c.MaxToolCallingIterations < 0:
		return config.Bad(c, "max_tool_calling_iterations", fmt.Sprintf("must be ≥ 0 (0 = no limit), got %d", c.MaxToolCallingIterations))
	case c.DecodeStepsPerCall < 1:
		return config.Bad(c, "decode_steps_per_call", fmt.Sprintf("must be ≥ 1, got %d", c.DecodeStepsPerCall))
	case !(c.Beta >= 0) || math.IsInf(c.Beta, 0):
		return config.Bad(c, "beta", fmt.Sprintf("must be ≥ 0, got %g", c.Beta))
	case !(c.Epsilon > 0) || math.IsInf(c.Epsilon, 0):
		return config.Bad(c, "epsilon", fmt.Sprintf("must be > 0, got %g", c.Epsilon))
	case !(c.EpsilonHigh >= 0) || math.IsInf(c.EpsilonHigh, 0):
		return config.Bad(c, "epsilon_high", fmt.Sprintf("must be ≥ 0 (0 = epsilon), got %g", c.EpsilonHigh))
	case c.Delta != 0 && !(c.Delta > 1+epsHigh && !math.IsInf(c.Delta, 0)):
		return config.Bad(c, "delta", fmt.Sprintf("must be 0 (off) or > 1 + epsilon_high = %g, got %g", 1+epsHigh, c.Delta))
	case !(c.TopEntropyQuantile >= 0 && c.TopEntropyQuantile <= 1):
		return config.Bad(c, "top_entropy_quantile", fmt.Sprintf("must be in [0, 1] (1 = all tokens), got %g", c.TopEntropyQuantile))
	case c.SyncRefModel && !(c.RefModelMixupAlpha >= 0 && c.RefModelMixupAlpha <= 1):
		return config.Bad(c, "ref_model_mixup_alpha", fmt.Sprintf("must be in [0, 1] with sync_ref_model, got %g", c.RefModelMixupAlpha))
	case c.SyncRefModel && c.RefModelSyncSteps < 1:
		return config.Bad(c, "ref_model_sync_steps", fmt.Sprintf("must be ≥ 1 with sync_ref_model, got %d", c.RefModelSyncSteps))
	case c.NumIterations < 1:
		return config.Bad(c, "num_iterations", fmt.Sprintf("must be ≥ 1, got %d", c.NumIterations))
	case c.StepsPerGeneration < 0:
		return config.Bad(c, "steps_per_generation", fmt.Sprintf("must be ≥ 0 (0 = gradient_accumulation_steps), got %d", c.StepsPerGeneration))
	case !config.TokensAtMost(mb, spg, c.MaxPromptLength+c.MaxCompletionLength):
		// Each option is bounded alone; the generation batch is their product (its KV cache).
		devices := ""
		if c.DeviceCount() > 1 {
			devices = fmt.Sprintf("× devices %d ", c.DeviceCount())
		}
		return config.Bad(c, "per_device_train_batch_size", fmt.Sprintf("%s× steps_per_generation × (max_prompt_length + max_completion_length) = %d × %d × (%d + %d) is more than %d tokens in one generation batch",
			devices, mb, spg, c.MaxPromptLength, c.MaxCompletionLength, config.MaxCount))
	case c.Evaluates() && !config.TokensAtMost(c.PerDeviceEvalBatchSize, c.MaxPromptLength+c.MaxCompletionLength):
		return config.Bad(c, "per_device_eval_batch_size", fmt.Sprintf("× (max_prompt_length + max_completion_length) = %d × (%d + %d) is more than %d tokens in one eval generation batch",
			c.PerDeviceEvalBatchSize, c.MaxPromptLength, c.MaxCompletionLength, config.MaxCount))
	case (mb*spg)%c.NumGenerations != 0 && c.DeviceCount() == 1:
		return config.Bad(c, "num_generations", fmt.Sprintf(
			"(%d) must divide the generation batch per_device_train_batch_size × steps_per_generation = %d × %d = %d",
			c.NumGenerations, c.PerDeviceTrainBatchSize, spg, mb*spg))
	case (mb*spg)%c.NumGenerations != 0:
		return config.Bad(c, "num_generations", fmt.Sprintf(
			"(%d) must divide the generation batch per_device_train_batch_size × devices × steps_per_generation = %d × %d × %d = %d",
			c.NumGenerations, c.PerDeviceTrainBatchSize, c.DeviceCount(), spg, mb*spg))
	case c.Evaluates() && c.PerDeviceEvalBatchSize%c.NumGenerations != 0:
		// TRL (GRPOConfig.__post_init__): the global eval batch must hold whole groups, since the
		// eval sampler repeats each prompt num_generations times and advantages are per group.
		return config.Bad(c, "per_device_eval_batch_size", fmt.Sprintf(
			"(%d) must be divisible by num_generations (%d): an eval batch holds whole groups of a prompt's completions",
			c.PerDeviceEvalBatchSize, c.NumGenerations))
	}
	for _, w := range c.RewardWeights {
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return config.Bad(c, "reward_weights", fmt.Sprintf("must be finite, got %g", w))
		}
	}
	for _, name := range c.RewardFuncs {
		if strings.TrimSpace(name) == "" {
			return config.Bad(c, "reward_funcs", "contains an empty name")
		}
	}
	return config.ValidateFinite(c)
}

// DropoutDisabled implements config.DropoutSetting: TRL's disable_dropout.
func (c *Config) DropoutDisabled() bool { return c.DisableDropout }

// Default implements config.Config.
func (*Config) Default() config.Config { return DefaultConfig() }
