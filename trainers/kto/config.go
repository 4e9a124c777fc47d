package kto

import (
	"fmt"
	"math"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Config is TRL's KTOConfig subset that posttrain implements.
type Config struct {
	config.Training     `yaml:",inline"`
	Beta                float64 `yaml:"beta" usage:"β: strength of the implicit KL penalty to the reference model"`
	LossType            string  `yaml:"loss_type" enum:"kto|apo_zero_unpaired" usage:"KTO loss, or APO-zero's unpaired variant (no KL reference point)"`
	DesirableWeight     float64 `yaml:"desirable_weight" usage:"loss weight of desirable (label true) examples"`
	UndesirableWeight   float64 `yaml:"undesirable_weight" usage:"loss weight of undesirable (label false) examples"`
	MaxLength           int     `yaml:"max_length" usage:"truncate prompt+completion to this many tokens: first the prompt to max_prompt_length, then the completion"`
	MaxPromptLength     int     `yaml:"max_prompt_length" usage:"length a prompt is cut to when prompt+completion exceeds max_length"`
	MaxCompletionLength int     `yaml:"max_completion_length" usage:"accepted for TRL compatibility: TRL's KTOTrainer applies it to encoder-decoder models only, so it has no effect here"`
	TruncationMode      string  `yaml:"truncation_mode" enum:"keep_end|keep_start" usage:"which end of a too-long prompt is kept"`
	DisableDropout      bool    `yaml:"disable_dropout" usage:"train without dropout (the LoRA adapter's lora_dropout; the decoders have no other): TRL's default for KTO"`
	config.PEFT         `yaml:",inline"`
}

// DefaultConfig returns KTOConfig's v0.24 defaults.
func DefaultConfig() *Config {
	c := &Config{Training: config.DefaultTraining(), PEFT: config.DefaultPEFT(), Beta: 0.1, LossType: "kto", DesirableWeight: 1, UndesirableWeight: 1, MaxLength: 1024, MaxPromptLength: 512, TruncationMode: "keep_end", DisableDropout: true}
	c.LearningRate = 1e-6
	c.GradientCheckpointing = true // TRL's default
	return c
}

// Method implements config.Config.
func (*Config) Method() string { return "kto" }

// Resolve implements config.Config.
func (*Config) Resolve() {}

// Validate implements config.Config.
func (c *Config) Validate() error {
	if err := config.ValidateCommon(c); err != nil {
		return err
	}
	switch {
	case !(c.Beta > 0) || math.IsInf(c.Beta, 0):
		return config.Bad(c, "beta", fmt.Sprintf("must be > 0, got %g", c.Beta))
	case !(c.DesirableWeight > 0) || math.IsInf(c.DesirableWeight, 0):
		return config.Bad(c, "desirable_weight", fmt.Sprintf("must be > 0, got %g", c.DesirableWeight))
	case !(c.UndesirableWeight > 0) || math.IsInf(c.UndesirableWeight, 0):
		return config.Bad(c, "undesirable_weight", fmt.Sprintf("must be > 0, got %g", c.UndesirableWeight))
	}
	if err := config.ValidateLengths(c, c.MaxLength, c.MaxPromptLength, c.MaxCompletionLength); err != nil {
		return err
	}
	return config.ValidateFinite(c)
}

// DropoutDisabled implements config.DropoutSetting: TRL's disable_dropout.
func (c *Config) DropoutDisabled() bool { return c.DisableDropout }

// Default implements config.Config.
func (*Config) Default() config.Config { return DefaultConfig() }
