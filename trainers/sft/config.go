package sft

import (
	"fmt"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Config is TRL's SFTConfig subset that posttrain implements.
type Config struct {
	config.Training    `yaml:",inline"`
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
	config.PEFT        `yaml:",inline"`
}

// DefaultConfig returns SFTConfig's v0.24 defaults.
func DefaultConfig() *Config {
	c := &Config{Training: config.DefaultTraining(), PEFT: config.DefaultPEFT(), MaxLength: 1024, PackingStrategy: "bfd", LossType: "nll", DatasetTextField: "text"}
	c.LearningRate = 2e-5
	c.GradientCheckpointing = true // TRL's default
	return c
}

// Method implements config.Config.
func (*Config) Method() string { return "sft" }

// Resolve implements config.Config; SFT has no derived defaults (completion_only_loss depends on the data).
func (*Config) Resolve() {}

// Validate implements config.Config.
func (c *Config) Validate() error {
	if err := config.ValidateCommon(c); err != nil {
		return err
	}
	if c.MaxLength < 1 && c.Packing {
		return config.Bad(c, "max_length", fmt.Sprintf("must be ≥ 1 with packing (it is the length of a packed row), got %d", c.MaxLength))
	}
	if c.MaxLength < 1 {
		return config.Bad(c, "max_length", fmt.Sprintf("must be ≥ 1, got %d", c.MaxLength))
	}
	if c.DatasetTextField == "" {
		return config.Bad(c, "dataset_text_field", "is empty: name the column of the text rows (TRL's default: text)")
	}
	return config.ValidateFinite(c)
}

// Default implements config.Config.
func (*Config) Default() config.Config { return DefaultConfig() }
