package ppo

import (
	"fmt"
	"math"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Config is TRL's PPOConfig with its OnPolicyConfig base (trl/trainer/ppo_config.py and
// trl/trainer/utils.py at v0.24): the subset posttrain implements. A rollout batch is
// per_device_train_batch_size × gradient_accumulation_steps prompts (TRL's local_batch_size, one
// process); each is trained num_ppo_epochs × num_mini_batches optimizer steps. The learning-rate
// schedule, logging_steps, save_steps and the checkpoint numbers count rollout batches (TRL's
// "updates", its global_step), not optimizer steps.
type Config struct {
	config.Training              `yaml:",inline"`
	RewardModelPath              string  `yaml:"reward_model_path" input:"path" flag:"reward-model" usage:"reward model (a *ForSequenceClassification checkpoint with num_labels 1, e.g. posttrain reward's output; local directory or Hub id) scoring query+response; it must share the policy's vocabulary"`
	ValueModelPath               string  `yaml:"value_model_path" input:"path" flag:"value-model" usage:"posttrain extension: the checkpoint the value model starts from (a *ForSequenceClassification with num_labels 1); empty = reward_model_path, as TRL's examples/scripts/ppo/ppo.py does"`
	NumPPOEpochs                 int     `yaml:"num_ppo_epochs" usage:"passes over each rollout batch"`
	NumMiniBatches               int     `yaml:"num_mini_batches" usage:"mini-batches per pass: each is one optimizer step; must divide gradient_accumulation_steps"`
	TotalEpisodes                int     `yaml:"total_episodes" usage:"prompts (episodes) to train on in all; 0 = num_train_epochs × the dataset's prompts (TRL's None)"`
	LocalRolloutForwardBatchSize int     `yaml:"local_rollout_forward_batch_size" usage:"rows per forward pass of the rollout on each device (generation; policy, reference, value and reward-model scoring; no gradient)"`
	ResponseLength               int     `yaml:"response_length" usage:"tokens generated per response"`
	StopToken                    string  `yaml:"stop_token" enum:"|eos" usage:"eos: generation stops at the tokenizer's eos_token and the response is truncated after it; empty = no stop token (TRL's None: response_length tokens, unless stop_token_id is set)"`
	StopTokenID                  int     `yaml:"stop_token_id" usage:"stop generation and truncate the response at this token id; -1 = none (TRL's None); exclusive with stop_token"`
	Temperature                  float64 `yaml:"temperature" usage:"sampling temperature; log-probs are scored at temperature + 1e-7, as TRL"`
	DecodeStepsPerCall           int     `yaml:"decode_steps_per_call" usage:"decode steps run per execution of the decode graph (unrolled; the rows are checked for stop tokens after each): fewer host round trips per token on a GPU; the tokens are those of one step per execution; 1 = one"`
	MissingEOSPenalty            float64 `yaml:"missing_eos_penalty" usage:"subtract this from the score of a response without the tokenizer's eos_token; 0 = off (TRL's None)"`
	KLCoef                       float64 `yaml:"kl_coef" usage:"coefficient of the per-token KL penalty folded into the rewards: −kl_coef·KL"`
	KLEstimator                  string  `yaml:"kl_estimator" enum:"k1|k3" usage:"per-token KL estimator: k1 = log π − log π_ref, k3 = (r − 1) − log r with r = π_ref/π"`
	WhitenRewards                bool    `yaml:"whiten_rewards" usage:"whiten the per-token rewards (masked, the mean kept) before GAE; needs mini-batches of ≥ 8 rows, as TRL"`
	Cliprange                    float64 `yaml:"cliprange" usage:"PPO clip range ε of the policy ratio"`
	VFCoef                       float64 `yaml:"vf_coef" usage:"weight of the value loss: loss = policy loss + vf_coef × value loss"`
	CliprangeValue               float64 `yaml:"cliprange_value" usage:"clip range of the value prediction around the rollout's values"`
	Gamma                        float64 `yaml:"gamma" usage:"discount factor of GAE"`
	Lam                          float64 `yaml:"lam" usage:"λ of GAE"`
	UsePEFT                      bool    `yaml:"use_peft" usage:"not supported by ppo (refused): the policy and the value model are trained in full"`
}

// DefaultConfig returns PPOConfig's v0.24 defaults (OnPolicyConfig's included: logging_steps 10,
// learning_rate 3e-6, response_length 53, temperature 0.7, local_rollout_forward_batch_size 64),
// and max_grad_norm 0: PPOConfig inherits TrainingArguments' 1.0, but PPOTrainer.train() is a loop
// of its own that never clips the gradients (no clip_grad_norm_), so no clipping is what TRL does;
// a max_grad_norm > 0 clips (a posttrain extension).
func DefaultConfig() *Config {
	c := &Config{Training: config.DefaultTraining(), NumPPOEpochs: 4, NumMiniBatches: 1, LocalRolloutForwardBatchSize: 64,
		ResponseLength: 53, DecodeStepsPerCall: 1, StopTokenID: -1, Temperature: 0.7, KLCoef: 0.05, KLEstimator: "k1", Cliprange: 0.2,
		VFCoef: 0.1, CliprangeValue: 0.2, Gamma: 1, Lam: 0.95}
	c.LearningRate = 3e-6
	c.MaxGradNorm = 0
	return c
}

// Method implements config.Config.
func (*Config) Method() string { return "ppo" }

// Resolve implements config.Config: value_model_path defaults to reward_model_path.
func (c *Config) Resolve() {
	if c.ValueModelPath == "" {
		c.ValueModelPath = c.RewardModelPath
	}
}

// ForwardRows is the rows of one forward pass of the rollout over all devices:
// local_rollout_forward_batch_size × devices (TRL's is per process).
func (c *Config) ForwardRows() int { return c.LocalRolloutForwardBatchSize * c.DeviceCount() }

// RolloutBatch is the prompts of one rollout: per_device_train_batch_size × devices ×
// gradient_accumulation_steps (TRL's batch_size, local_batch_size × processes).
func (c *Config) RolloutBatch() int { return c.MicroBatch() * c.GradientAccumulationSteps }

// Updates is the number of rollout batches of a run over numPrompts prompts (TRL's
// num_total_batches = ceil(total_episodes / batch_size)), or max_steps when > 0 (a posttrain
// extension: TRL's PPOTrainer ignores max_steps).
func (c *Config) Updates(numPrompts int) int {
	if c.MaxSteps > 0 {
		return c.MaxSteps
	}
	episodes := c.TotalEpisodes
	if episodes == 0 {
		episodes = int(c.NumTrainEpochs * float64(numPrompts))
	}
	return config.CeilDiv(episodes, c.RolloutBatch())
}

// Validate implements config.Config.
func (c *Config) Validate() error {
	if err := config.ValidateCommon(c); err != nil {
		return err
	}
	if c.FSDP {
		return config.Bad(c, "fsdp", "is not for ppo, which generates with the whole weights on each device: use --devices N without it (data parallel)")
	}
	if c.TensorParallel {
		return config.Bad(c, "tensor_parallel", "is not for ppo, which generates with the whole weights on each device: use --devices N without it (data parallel)")
	}
	nonNeg := func(key string, v float64) error {
		if !(v >= 0) || math.IsInf(v, 0) {
			return config.Bad(c, key, fmt.Sprintf("must be ≥ 0, got %g", v))
		}
		return nil
	}
	switch {
	case c.UsePEFT:
		return config.Bad(c, "use_peft", "is not supported by ppo: the policy and the value model are trained in full (LoRA would also reach the value model's forward pass in the shared context)")
	case c.RewardModelPath == "":
		return config.Bad(c, "reward_model_path", "is required: the reward model that scores the responses (posttrain reward's output)")
	case c.NumPPOEpochs < 1:
		return config.Bad(c, "num_ppo_epochs", fmt.Sprintf("must be ≥ 1, got %d", c.NumPPOEpochs))
	case c.NumMiniBatches < 1:
		return config.Bad(c, "num_mini_batches", fmt.Sprintf("must be ≥ 1, got %d", c.NumMiniBatches))
	case c.GradientAccumulationSteps%c.NumMiniBatches != 0:
		return config.Bad(c, "num_mini_batches", fmt.Sprintf("(%d) must divide gradient_accumulation_steps (%d): a mini-batch is whole micro-batches of per_device_train_batch_size rows",
			c.NumMiniBatches, c.GradientAccumulationSteps))
	case c.TotalEpisodes < 0:
		return config.Bad(c, "total_episodes", fmt.Sprintf("must be ≥ 0 (0 = num_train_epochs × prompts), got %d", c.TotalEpisodes))
	case c.LocalRolloutForwardBatchSize < 1:
		return config.Bad(c, "local_rollout_forward_batch_size", fmt.Sprintf("must be ≥ 1, got %d", c.LocalRolloutForwardBatchSize))
	case c.DecodeStepsPerCall < 1:
		return config.Bad(c, "decode_steps_per_call", fmt.Sprintf("must be ≥ 1, got %d", c.DecodeStepsPerCall))
	case c.ResponseLength < 1:
		return config.Bad(c, "response_length", fmt.Sprintf("must be ≥ 1, got %d", c.ResponseLength))
	case c.StopTokenID < -1:
		return config.Bad(c, "stop_token_id", fmt.Sprintf("must be a token id ≥ 0, or -1 for none, got %d", c.StopTokenID))
	case c.StopToken != "" && c.StopTokenID >= 0:
		return config.Bad(c, "stop_token", "and stop_token_id are exclusive: give one (TRL: \"You cannot set both\")")
	case !(c.Temperature > 0) || math.IsInf(c.Temperature, 0):
		return config.Bad(c, "temperature", fmt.Sprintf("must be > 0, got %g", c.Temperature))
	case !(c.Cliprange > 0) || math.IsInf(c.Cliprange, 0):
		return config.Bad(c, "cliprange", fmt.Sprintf("must be > 0, got %g", c.Cliprange))
	case !(c.CliprangeValue > 0) || math.IsInf(c.CliprangeValue, 0):
		return config.Bad(c, "cliprange_value", fmt.Sprintf("must be > 0, got %g", c.CliprangeValue))
	case !(c.Gamma >= 0 && c.Gamma <= 1):
		return config.Bad(c, "gamma", fmt.Sprintf("must be in [0, 1], got %g", c.Gamma))
	case !(c.Lam >= 0 && c.Lam <= 1):
		return config.Bad(c, "lam", fmt.Sprintf("must be in [0, 1], got %g", c.Lam))
	case c.WhitenRewards && c.RolloutBatch()/c.NumMiniBatches < 8:
		return config.Bad(c, "whiten_rewards", fmt.Sprintf("needs mini-batches of ≥ 8 rows (TRL's assertion), got per_device_train_batch_size × gradient_accumulation_steps / num_mini_batches = %d",
			c.RolloutBatch()/c.NumMiniBatches))
	}
	for _, o := range []struct {
		key string
		v   float64
	}{{"kl_coef", c.KLCoef}, {"vf_coef", c.VFCoef}, {"missing_eos_penalty", c.MissingEOSPenalty}} {
		if err := nonNeg(o.key, o.v); err != nil {
			return err
		}
	}
	return config.ValidateFinite(c)
}

// DropoutDisabled implements config.DropoutSetting: TRL's PPOTrainer turns dropout off in every
// model it holds, with no option.
func (*Config) DropoutDisabled() bool { return true }

// Default implements config.Config.
func (*Config) Default() config.Config { return DefaultConfig() }
