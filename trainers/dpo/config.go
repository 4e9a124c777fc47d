package dpo

import (
	"fmt"
	"math"
	"slices"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Config is TRL's DPOConfig subset that posttrain implements.
type Config struct {
	config.Training       `yaml:",inline"`
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
	config.PEFT           `yaml:",inline"`
}

// DefaultConfig returns DPOConfig's v0.24 defaults.
func DefaultConfig() *Config {
	c := &Config{Training: config.DefaultTraining(), PEFT: config.DefaultPEFT(), Beta: 0.1, LossType: []string{"sigmoid"}, DiscopopTau: 0.05, FDivergenceType: "reverse_kl", FAlphaDivergenceCoef: 1, MaxLength: 1024, MaxPromptLength: 512, TruncationMode: "keep_end", DisableDropout: true}
	c.LearningRate = 1e-6
	c.GradientCheckpointing = true // TRL's default
	return c
}

// Method implements config.Config.
func (*Config) Method() string { return "dpo" }

// Resolve implements config.Config.
func (*Config) Resolve() {}

// Validate implements config.Config.
func (c *Config) Validate() error {
	if slices.Contains(c.LossType, "bco_pair") {
		return config.Bad(c, "loss_type", "bco_pair is not implemented: its running mean of the rewards (TRL's RunningMoments) is trainer state that TRL updates on every batch, eval included, and does not checkpoint")
	}
	if err := config.ValidateCommon(c); err != nil {
		return err
	}
	switch {
	case len(c.LossType) == 0:
		return config.Bad(c, "loss_type", "is empty: name at least one loss type")
	case len(c.LossWeights) > 0 && len(c.LossWeights) != len(c.LossType):
		return config.Bad(c, "loss_weights", fmt.Sprintf("has %d weights for %d loss types", len(c.LossWeights), len(c.LossType)))
	case !(c.Beta > 0) || math.IsInf(c.Beta, 0):
		return config.Bad(c, "beta", fmt.Sprintf("must be > 0, got %g", c.Beta))
	case !(c.LabelSmoothing >= 0 && c.LabelSmoothing < 0.5):
		return config.Bad(c, "label_smoothing", fmt.Sprintf("must be in [0, 0.5), got %g", c.LabelSmoothing))
	case !(c.DiscopopTau > 0) || math.IsInf(c.DiscopopTau, 0):
		return config.Bad(c, "discopop_tau", fmt.Sprintf("must be > 0, got %g", c.DiscopopTau))
	case !(c.RPOAlpha >= 0) || math.IsInf(c.RPOAlpha, 0):
		return config.Bad(c, "rpo_alpha", fmt.Sprintf("must be ≥ 0 (0 = off), got %g", c.RPOAlpha))
	case !(c.LDAlpha >= 0) || math.IsInf(c.LDAlpha, 0):
		return config.Bad(c, "ld_alpha", fmt.Sprintf("must be ≥ 0 (0 = off), got %g", c.LDAlpha))
	case c.FDivergenceType == "alpha_divergence" && (c.FAlphaDivergenceCoef == 0 || math.IsNaN(c.FAlphaDivergenceCoef) || math.IsInf(c.FAlphaDivergenceCoef, 0)):
		return config.Bad(c, "f_alpha_divergence_coef", fmt.Sprintf("must be finite and ≠ 0 with f_divergence_type alpha_divergence (the logits divide by it), got %g", c.FAlphaDivergenceCoef))
	}
	for _, w := range c.LossWeights {
		if math.IsNaN(w) || math.IsInf(w, 0) {
			return config.Bad(c, "loss_weights", fmt.Sprintf("must be finite, got %g", w))
		}
	}
	// TRL warns and ignores label_smoothing for the other types; posttrain refuses instead.
	smoothed := []string{"sigmoid", "robust", "exo_pair", "aot", "aot_pair", "sft"}
	for _, t := range c.LossType {
		if c.LabelSmoothing > 0 && !slices.Contains(smoothed, t) {
			return config.Bad(c, "label_smoothing", fmt.Sprintf("applies to loss_type sigmoid, robust, exo_pair, aot and aot_pair only, not %s", t))
		}
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
