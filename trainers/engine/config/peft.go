package config

import (
	"fmt"
	"math"
	"slices"
)

// PEFT is TRL's ModelConfig LoRA options (trl/trainer/model_config.py), which get_peft_config
// turns into PEFT's LoraConfig (task_type CAUSAL_LM, bias "none"): with use_peft the run trains
// a LoRA adapter (models/lora) instead of every weight, the reference model of DPO, KTO and GRPO
// is the base model with the adapter disabled, and the checkpoints and the output hold PEFT's
// adapter_config.json and adapter_model.safetensors. SFT, DPO, KTO and GRPO embed it.
type PEFT struct {
	UsePEFT           bool     `yaml:"use_peft" usage:"train a LoRA adapter (PEFT) instead of every weight: the base stays frozen, the output holds adapter_config.json and adapter_model.safetensors, the reference model (DPO, KTO, GRPO with beta > 0) is the base with the adapter disabled"`
	LoraR             int      `yaml:"lora_r" usage:"LoRA rank r (use_peft)"`
	LoraAlpha         int      `yaml:"lora_alpha" usage:"LoRA alpha α: the adapter's update is scaled by α/r (α/√r with use_rslora)"`
	LoraDropout       float64  `yaml:"lora_dropout" usage:"dropout probability on the adapter's input while training (none with disable_dropout: DPO's and KTO's default)"`
	LoraTargetModules []string `yaml:"lora_target_modules" usage:"layers that get an adapter (comma-separated names such as q_proj,v_proj, matched as PEFT matches them; all-linear = every linear layer but the LM head); empty = PEFT's default for the model_type (q_proj,v_proj for qwen2, qwen3, llama)"`
	UseRSLoRA         bool     `yaml:"use_rslora" usage:"rank-stabilised LoRA: scale the update by α/√r instead of α/r"`
	LoraModulesToSave []string `yaml:"lora_modules_to_save" usage:"modules trained in full beside the adapter and saved with it (e.g. lm_head of an untied model, model.norm)"`
}

// DefaultPEFT returns ModelConfig's v0.24 defaults.
func DefaultPEFT() PEFT {
	return PEFT{LoraR: 16, LoraAlpha: 32, LoraDropout: 0.05}
}

// PEFTOptions returns the LoRA options of a configuration that embeds PEFT.
func (p *PEFT) PEFTOptions() *PEFT { return p }

// PEFTOptions returns cfg's LoRA options, or nil for a method without them.
func PEFTOptions(cfg Config) *PEFT {
	if p, ok := cfg.(interface{ PEFTOptions() *PEFT }); ok {
		return p.PEFTOptions()
	}
	return nil
}

// validatePEFT checks the LoRA options of a run with use_peft (the model decides the rest: which
// target modules exist).
func validatePEFT(c Config) error {
	p := PEFTOptions(c)
	if p == nil || !p.UsePEFT {
		return nil
	}
	switch {
	case p.LoraR < 1:
		return Bad(c, "lora_r", fmt.Sprintf("must be ≥ 1, got %d", p.LoraR))
	case !(p.LoraDropout >= 0 && p.LoraDropout < 1) || math.IsInf(p.LoraDropout, 0):
		return Bad(c, "lora_dropout", fmt.Sprintf("must be in [0, 1), got %g", p.LoraDropout))
	case slices.Contains(p.LoraTargetModules, "all-linear") && len(p.LoraTargetModules) > 1:
		return Bad(c, "lora_target_modules", fmt.Sprintf("all-linear must be given alone, got %v", p.LoraTargetModules))
	case slices.Contains(p.LoraTargetModules, ""):
		return Bad(c, "lora_target_modules", "has an empty module name")
	case slices.Contains(p.LoraModulesToSave, ""):
		return Bad(c, "lora_modules_to_save", "has an empty module name")
	}
	return nil
}
