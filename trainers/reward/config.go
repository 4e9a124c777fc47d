package reward

import (
	"fmt"
	"math"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Config is TRL's RewardConfig subset that posttrain implements (trl/trainer/reward_config.py at
// v0.24): a Bradley-Terry reward model on preference pairs.
type Config struct {
	config.Training          `yaml:",inline"`
	MaxLength                int     `yaml:"max_length" usage:"drop the pairs whose chosen or rejected sequence (prompt included) is longer than this many tokens, as TRL filters them (no truncation); 0 = no limit (TRL's None)"`
	CenterRewardsCoefficient float64 `yaml:"center_rewards_coefficient" usage:"add this × mean((r_chosen + r_rejected)²) to the loss, pulling the rewards towards mean zero (arXiv:2312.09244 eq. 2; TRL recommends 0.01); 0 = off (TRL's None)"`
	PadToken                 string  `yaml:"pad_token" usage:"token the score is read before (the model's pad_token_id, saved in config.json): the tokenizer's pad_token, else its eos_token, when empty"`
}

// DefaultConfig returns RewardConfig's v0.24 defaults.
func DefaultConfig() *Config {
	c := &Config{Training: config.DefaultTraining(), MaxLength: 1024}
	c.LearningRate = 1e-4
	c.GradientCheckpointing = true // TRL's default
	return c
}

// Method implements config.Config.
func (*Config) Method() string { return "reward" }

// Resolve implements config.Config; RewardConfig has no derived defaults besides bf16's.
func (*Config) Resolve() {}

// Validate implements config.Config.
func (c *Config) Validate() error {
	if err := config.ValidateCommon(c); err != nil {
		return err
	}
	switch {
	case c.MaxLength < 0:
		return config.Bad(c, "max_length", fmt.Sprintf("must be ≥ 0 (0 = no limit), got %d", c.MaxLength))
	case !(c.CenterRewardsCoefficient >= 0) || math.IsInf(c.CenterRewardsCoefficient, 0):
		return config.Bad(c, "center_rewards_coefficient", fmt.Sprintf("must be ≥ 0 (0 = off), got %g", c.CenterRewardsCoefficient))
	}
	return config.ValidateFinite(c)
}

// Default implements config.Config.
func (*Config) Default() config.Config { return DefaultConfig() }
