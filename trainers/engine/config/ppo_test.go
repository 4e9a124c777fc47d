package config_test

import (
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/ppo"
)

// PPOConfig's v0.24 defaults (ppo_config.py and OnPolicyConfig in trainer/utils.py), and TRL's
// count of updates: num_total_batches = ceil(total_episodes / batch_size), total_episodes
// defaulting to num_train_epochs × the dataset's prompts.
func TestPPO_DefaultsAndUpdates(t *testing.T) {
	c := ppo.DefaultConfig()
	if c.NumPPOEpochs != 4 || c.NumMiniBatches != 1 || c.KLCoef != 0.05 || c.KLEstimator != "k1" || c.Cliprange != 0.2 ||
		c.VFCoef != 0.1 || c.CliprangeValue != 0.2 || c.Gamma != 1 || c.Lam != 0.95 || c.WhitenRewards || c.LearningRate != 3e-6 ||
		c.ResponseLength != 53 || c.Temperature != 0.7 || c.LocalRolloutForwardBatchSize != 64 || c.StopToken != "" ||
		c.StopTokenID != -1 || c.MissingEOSPenalty != 0 || c.LoggingSteps != 10 || c.TotalEpisodes != 0 {
		t.Errorf("defaults differ from TRL v0.24's: %+v", *c)
	}
	c.RewardModelPath = "rm"
	c.Resolve()
	if c.ValueModelPath != "rm" {
		t.Errorf("value_model_path %q, want the reward model's", c.ValueModelPath)
	}
	c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps, c.NumTrainEpochs = 4, 2, 3
	if got := c.Updates(10); got != 4 { // ceil(30 / 8)
		t.Errorf("updates of 10 prompts × 3 epochs in batches of 8: %d, want 4", got)
	}
	c.TotalEpisodes = 17
	if got := c.Updates(10); got != 3 { // ceil(17 / 8)
		t.Errorf("updates of 17 episodes: %d, want 3", got)
	}
	c.MaxSteps = 5
	if got := c.Updates(10); got != 5 {
		t.Errorf("max_steps 5: %d updates", got)
	}
	c.Model, c.Dataset, c.OutputDir = "m", "d", "o"
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		edit func(*ppo.Config)
		want string
	}{
		{func(c *ppo.Config) { c.NumPPOEpochs = 0 }, "num_ppo_epochs (--num-ppo-epochs) must be ≥ 1"},
		{func(c *ppo.Config) { c.Lam = 1.5 }, "lam (--lam) must be in [0, 1]"},
		{func(c *ppo.Config) { c.KLCoef = -1 }, "kl_coef (--kl-coef) must be ≥ 0"},
		{func(c *ppo.Config) { c.ResponseLength = 0 }, "response_length (--response-length) must be ≥ 1"},
		{func(c *ppo.Config) { c.StopTokenID = -2 }, "stop_token_id (--stop-token-id) must be a token id"},
		{func(c *ppo.Config) { c.RewardModelPath = "" }, "reward_model_path (--reward-model) is required"},
	} {
		d := *c
		tc.edit(&d)
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate: %v, want %q", err, tc.want)
		}
	}
}
