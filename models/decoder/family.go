package decoder

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
)

// Family is what a config's model_type fixes about the decoder; the config's own fields
// (attention_bias, mlp_bias, head_dim, tie_word_embeddings, rope_scaling) set the rest.
type Family struct {
	// Name is the family's name in messages and help ("Qwen2", "Gemma 3").
	Name string
	// Architecture is config.json's architectures[0] for this model_type.
	Architecture string
	// Classifier is the architecture of its sequence-classification model when it is not
	// Architecture with ForSequenceClassification for ForCausalLM (Gemma 3's text model).
	Classifier string
	// QKVBias: the q/k/v projections always carry biases (Qwen2); otherwise attention_bias says,
	// for q/k/v and o alike (Llama, Qwen3).
	QKVBias bool
	// AttentionBiasField: config.json has attention_bias (and, when MLPBiasField, mlp_bias).
	AttentionBiasField, MLPBiasField bool
	// QKNorm: per-head RMSNorm q_norm/k_norm over head_dim on the queries and keys, before RoPE
	// (Qwen3).
	QKNorm bool
	// DefaultHeadDim is head_dim when config.json has none; 0 means hidden_size/num_attention_heads.
	DefaultHeadDim int
	// Gemma3: the Gemma 3 decoder (gemma3.go): RMSNorm x·(1+w), scaled embeddings, GELU-tanh,
	// pre- and post-norms, sliding-window layers with their own RoPE base, logit soft-capping.
	Gemma3 bool
	// RopeTypes are the rope_scaling types the family accepts; nil means RopeTypes.
	RopeTypes []string
	// DefaultPadTokenID is the configuration class's pad_token_id when config.json has none
	// (Gemma3TextConfig 0, SmolLM3Config 128004); nil: none (PretrainedConfig's None).
	DefaultPadTokenID *int
	// ConfigJSON sets the config.json keys the family's transformers configuration class writes
	// beyond the shared ones (save.go), so a saved checkpoint loads in transformers and back here.
	ConfigJSON func(m map[string]any, cfg *Config)
	// Defaults fills what the family's configuration class sets when config.json (data) lacks
	// the key, before the shared defaults (ParseConfig); ropeThetaSet: rope_parameters gave a
	// rope_theta. Validate refuses the family's settings the code does not implement, through
	// bad (Validate's one-line errors, naming the field).
	Defaults func(c *Config, data []byte, ropeThetaSet bool)
	Validate func(c *Config, bad func(field, format string, args ...any))
}

// Families are the supported model_type values, each registered by the file of its family:
// qwen2.go (modeling_qwen2.py), qwen3.go (modeling_qwen3.py), llama.go (modeling_llama.py: Llama
// 3.x, and SmolLM2, which is model_type llama too), smollm3.go (modeling_smollm3.py) and gemma3.go
// (modeling_gemma3.py: Gemma3ForCausalLM, the text model of Gemma 3). Everything else in this
// package is shared by all of them and switched by the Family's fields and the config's.
var Families = map[string]Family{}

// register adds a family under its model_type; each family file calls it once, at package
// initialisation.
func register(modelType string, f Family) struct{} {
	if _, dup := Families[modelType]; dup {
		panic("decoder: model_type " + modelType + " registered twice")
	}
	Families[modelType] = f
	return struct{}{}
}

// ModelTypes lists the supported model_type values, sorted.
func ModelTypes() []string { return slices.Sorted(maps.Keys(Families)) }

// FamilyNames lists the families' names for help text, in model_type order: "Gemma 3, Llama,
// Qwen2, Qwen3 or SmolLM3".
func FamilyNames() string {
	var names []string
	for _, t := range ModelTypes() {
		names = append(names, Families[t].Name)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Family is the config's model family (the zero Family for an unsupported model_type, which
// Validate refuses).
func (c *Config) Family() Family { return Families[c.ModelType] }

// QKVBias reports whether the q/k/v projections carry biases.
func (c *Config) QKVBias() bool { return c.Family().QKVBias || c.AttentionBias }

// ropeTypes are the rope_scaling types the config's family accepts.
func (c *Config) ropeTypes() []string {
	if t := c.Family().RopeTypes; t != nil {
		return t
	}
	return RopeTypes
}

// errName is what this package's errors about the model start with: its model_type ("llama",
// "qwen3", ...), or "model" when there is no config yet.
func (c *Config) errName() string {
	if c == nil || c.ModelType == "" {
		return "model"
	}
	return c.ModelType
}

// modelTypeName is errName for a config.json that did not parse: its model_type, if it has one.
func modelTypeName(data []byte) string {
	var m struct {
		ModelType string `json:"model_type"`
	}
	_ = json.Unmarshal(data, &m)
	return (&Config{ModelType: m.ModelType}).errName()
}

func intPtr(v int) *int { return &v }

// PaddingIdx is the padding_idx transformers gives the family's embedding,
// nn.Embedding(vocab_size, hidden_size, padding_idx=pad_token_id) in every modeling file here:
// config.json's pad_token_id, else the family's DefaultPadTokenID. ok is false without one, and
// for an id outside the vocabulary (which transformers refuses to build; such a tiny config has no
// padding row here).
func (c *Config) PaddingIdx() (pad int, ok bool) {
	p := c.PadTokenID
	if p == nil {
		p = c.Family().DefaultPadTokenID
	}
	if p == nil || *p < 0 || *p >= c.VocabSize {
		return 0, false
	}
	return *p, true
}

// OBias reports whether o_proj carries a bias (attention_bias; never in Qwen2).
func (c *Config) OBias() bool { return c.AttentionBias }
