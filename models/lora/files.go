package lora

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/models/safetensors"
)

// fileConfig is adapter_config.json: PEFT's LoraConfig.to_dict() for a CAUSAL_LM LoRA adapter
// (the keys of LoraConfig that PeftConfig.from_pretrained reads, at their defaults apart from
// the run's).
type fileConfig struct {
	PeftType          string         `json:"peft_type"`
	TaskType          *string        `json:"task_type"`
	BaseModel         *string        `json:"base_model_name_or_path"`
	Revision          *string        `json:"revision"`
	InferenceMode     bool           `json:"inference_mode"`
	R                 int            `json:"r"`
	TargetModules     any            `json:"target_modules"`
	ExcludeModules    any            `json:"exclude_modules"`
	LoraAlpha         float64        `json:"lora_alpha"`
	LoraDropout       float64        `json:"lora_dropout"`
	FanInFanOut       bool           `json:"fan_in_fan_out"`
	Bias              string         `json:"bias"`
	UseRSLoRA         bool           `json:"use_rslora"`
	ModulesToSave     []string       `json:"modules_to_save"`
	InitLoraWeights   any            `json:"init_lora_weights"`
	LayersToTransform any            `json:"layers_to_transform"`
	LayersPattern     any            `json:"layers_pattern"`
	RankPattern       map[string]any `json:"rank_pattern"`
	AlphaPattern      map[string]any `json:"alpha_pattern"`
	UseDoRA           bool           `json:"use_dora"`
	LoraBias          bool           `json:"lora_bias"`
	LayerReplication  any            `json:"layer_replication"`
	MegatronConfig    any            `json:"megatron_config"`
	MegatronCore      string         `json:"megatron_core"`
	LoftqConfig       map[string]any `json:"loftq_config"`
	AutoMapping       any            `json:"auto_mapping"`
	// LoraConfig's variants (PEFT 0.21.2) that change the forward pass, read to be refused (and so
	// never written: omitempty).
	TargetParameters      any  `json:"target_parameters,omitempty"`
	TrainableTokenIndices any  `json:"trainable_token_indices,omitempty"`
	AloraInvocationTokens any  `json:"alora_invocation_tokens,omitempty"`
	UseQALoRA             bool `json:"use_qalora,omitempty"`
	KaSAConfig            any  `json:"kasa_config,omitempty"`
	MonteCLoRAConfig      any  `json:"monteclora_config,omitempty"`
	UseBDLoRA             any  `json:"use_bdlora,omitempty"`
	ArrowConfig           any  `json:"arrow_config,omitempty"`
}

// WriteFiles writes adapter_config.json and adapter_model.safetensors (float32 tensors with
// PEFT's names, as Vars lists them) into dir, which must exist.
func (a *Adapter) WriteFiles(dir string, weights []*safetensors.Tensor) error {
	c := a.Config
	task, base := "CAUSAL_LM", c.BaseModel
	targets := slices.Clone(c.TargetModules)
	slices.Sort(targets)
	var tm any = targets
	if c.TargetRegex != "" {
		tm = c.TargetRegex
	}
	fc := fileConfig{
		PeftType: "LORA", TaskType: &task, BaseModel: &base, InferenceMode: true, R: c.R, TargetModules: tm,
		LoraAlpha: c.Alpha, LoraDropout: c.Dropout, Bias: "none", UseRSLoRA: c.UseRSLoRA, ModulesToSave: c.ModulesToSave,
		InitLoraWeights: true, RankPattern: map[string]any{}, AlphaPattern: map[string]any{},
		MegatronCore: "megatron.core", LoftqConfig: map[string]any{},
	}
	data, err := json.MarshalIndent(fc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ConfigName), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("lora: %w", err)
	}
	return safetensors.WriteFile(filepath.Join(dir, WeightsName), weights, map[string]string{"format": "pt"})
}

// ReadConfig reads dir's adapter_config.json; an option posttrain does not implement (DoRA, a
// bias, rank or alpha patterns, ...) is an error naming the file and the key.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, ConfigName)
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("adapter: %w", err)
	}
	fc := fileConfig{Bias: "none", LoraAlpha: 8, R: 8}
	if err := json.Unmarshal(data, &fc); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	bad := func(key, msg string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("%s: %s: %s", path, key, fmt.Sprintf(msg, args...))
	}
	switch {
	case fc.PeftType != "LORA":
		return bad("peft_type", "%q is not supported (only LORA)", fc.PeftType)
	case fc.TaskType != nil && *fc.TaskType != "CAUSAL_LM":
		return bad("task_type", "%q is not supported (only CAUSAL_LM)", *fc.TaskType)
	case fc.Bias != "none":
		return bad("bias", "%q is not supported (only none)", fc.Bias)
	case fc.UseDoRA:
		return bad("use_dora", "DoRA is not supported")
	case fc.LoraBias:
		return bad("lora_bias", "is not supported")
	case fc.FanInFanOut:
		return bad("fan_in_fan_out", "is not supported")
	case len(fc.RankPattern) > 0:
		return bad("rank_pattern", "is not supported")
	case len(fc.AlphaPattern) > 0:
		return bad("alpha_pattern", "is not supported")
	case fc.LayersToTransform != nil:
		return bad("layers_to_transform", "is not supported")
	case fc.ExcludeModules != nil:
		return bad("exclude_modules", "is not supported")
	case fc.LayerReplication != nil:
		return bad("layer_replication", "is not supported")
	case fc.TargetParameters != nil:
		return bad("target_parameters", "LoRA on parameters is not supported (only target_modules)")
	case fc.TrainableTokenIndices != nil:
		return bad("trainable_token_indices", "is not supported")
	case fc.AloraInvocationTokens != nil:
		return bad("alora_invocation_tokens", "Activated LoRA is not supported")
	case fc.UseQALoRA:
		return bad("use_qalora", "QALoRA is not supported")
	case fc.KaSAConfig != nil:
		return bad("kasa_config", "KaSA is not supported")
	case fc.MonteCLoRAConfig != nil:
		return bad("monteclora_config", "MonteCLoRA is not supported")
	case fc.UseBDLoRA != nil && fc.UseBDLoRA != false:
		return bad("use_bdlora", "BD-LoRA is not supported")
	case fc.ArrowConfig != nil:
		return bad("arrow_config", "Arrow routing is not supported")
	}
	c := Config{R: fc.R, Alpha: fc.LoraAlpha, Dropout: fc.LoraDropout, UseRSLoRA: fc.UseRSLoRA, ModulesToSave: fc.ModulesToSave}
	if fc.BaseModel != nil {
		c.BaseModel = *fc.BaseModel
	}
	switch t := fc.TargetModules.(type) {
	case string:
		if t == AllLinear {
			c.TargetModules = []string{AllLinear}
		} else {
			c.TargetRegex = t
		}
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return bad("target_modules", "entries must be strings, got %v", x)
			}
			c.TargetModules = append(c.TargetModules, s)
		}
	case nil:
		return bad("target_modules", "is required")
	default:
		return bad("target_modules", "must be a list of module names or a string, got %v", t)
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ReadWeights reads dir's adapter_model.safetensors, keyed by PEFT's names. PEFT's in-memory
// names (with the adapter name, ".default.") are accepted too.
func ReadWeights(dir string) (map[string]*safetensors.Tensor, error) {
	path := filepath.Join(dir, WeightsName)
	ts, _, err := safetensors.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("adapter: %w", err)
	}
	out := make(map[string]*safetensors.Tensor, len(ts))
	for name, t := range ts {
		n := strings.Replace(strings.Replace(name, ".lora_A.default.", ".lora_A.", 1), ".lora_B.default.", ".lora_B.", 1)
		out[n] = t
	}
	return out, nil
}
