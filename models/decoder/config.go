package decoder

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ConfigFileName is the HF file holding a checkpoint's Config.
const ConfigFileName = "config.json"

// Config is the subset of a HF Qwen2, Qwen3, Llama, SmolLM3 or Gemma 3 (gemma3_text) config.json
// that the decoder uses.
type Config struct {
	ModelType string `json:"model_type"`
	VocabSize int    `json:"vocab_size"`
	// ChunkElements, when > 0, replaces DefaultChunkElements for this model (not in config.json;
	// tests set it to force several chunks).
	ChunkElements         int     `json:"-"`
	HiddenSize            int     `json:"hidden_size"`
	IntermediateSize      int     `json:"intermediate_size"`
	NumHiddenLayers       int     `json:"num_hidden_layers"`
	NumAttentionHeads     int     `json:"num_attention_heads"`
	NumKeyValueHeads      int     `json:"num_key_value_heads"`
	HeadDim               int     `json:"head_dim"` // absent in Qwen2 configs: HiddenSize/NumAttentionHeads (Qwen3: 128)
	RMSNormEps            float64 `json:"rms_norm_eps"`
	RopeTheta             float64 `json:"rope_theta"`
	TieWordEmbeddings     bool    `json:"tie_word_embeddings"`
	MaxPositionEmbeddings int     `json:"max_position_embeddings"`
	HiddenAct             string  `json:"hidden_act"`
	TorchDType            string  `json:"torch_dtype"`
	InitializerRange      float64 `json:"initializer_range"`
	BOSTokenID            *int    `json:"-"`
	EOSTokenIDs           []int   `json:"-"` // eos_token_id: one id or a list
	// AttentionBias (Qwen3, Llama): q/k/v/o projections with biases; MLPBias (Llama): the MLP's.
	AttentionBias bool `json:"attention_bias"`
	MLPBias       bool `json:"mlp_bias"`
	// NoRopeLayers (SmolLM3's no_rope_layers): 1 where a layer applies RoPE, 0 on its NoPE layers;
	// ParseConfig derives it from NoRopeLayerInterval (no_rope_layer_interval) when absent. See
	// UsesRope.
	NoRopeLayers        []int `json:"no_rope_layers"`
	NoRopeLayerInterval int   `json:"no_rope_layer_interval"`
	// Rope is the parsed rope_scaling (or rope_parameters); see InvFreq.
	Rope Rope `json:"-"`

	// RopeScaling is config.json's raw rope_scaling; ParseConfig parses it into Rope and clears it.
	RopeScaling json.RawMessage `json:"rope_scaling"`
	// LayerTypes (layer_types): "full_attention" layers, and for Gemma 3 "sliding_attention" ones
	// (filled from sliding_window_pattern when config.json has no layer_types).
	LayerTypes []string `json:"layer_types"`
	// Gemma holds the gemma3_text fields (nil for the other families); see gemma3.go.
	Gemma *Gemma3 `json:"-"`
	// Fields that select features this implementation does not have; Validate refuses them.
	UseSlidingWindow bool    `json:"use_sliding_window"`
	AttentionDropout float64 `json:"attention_dropout"`
	UseMRope         bool    `json:"use_mrope"`

	// NumLabels > 0 makes the config a sequence-classification model (classifier.go): a score
	// head of NumLabels outputs instead of the LM head. PadTokenID is config.json's pad_token_id.
	NumLabels  int  `json:"-"`
	PadTokenID *int `json:"-"`
}

// ReadConfig reads and validates dir/config.json.
func ReadConfig(dir string) (*Config, error) {
	path := filepath.Join(dir, ConfigFileName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", modelTypeName(data), path, err)
	}
	return cfg, nil
}

// ParseConfig parses and validates the content of a config.json, filling HF's defaults
// (head_dim = hidden_size/num_attention_heads, Qwen3's 128; num_key_value_heads =
// num_attention_heads).
func ParseConfig(data []byte) (*Config, error) {
	cfg := &Config{HiddenAct: "silu", RopeTheta: 10000, RMSNormEps: 1e-6, InitializerRange: 0.02}
	if err := json.Unmarshal(data, cfg); err != nil {
		return nil, fmt.Errorf("parse config: %w", err)
	}
	if cfg.Family().Gemma3 {
		var err error
		if cfg, err = parseGemma3(data); err != nil {
			return nil, err
		}
	}
	var ids struct {
		BOS json.RawMessage `json:"bos_token_id"`
		EOS json.RawMessage `json:"eos_token_id"`
		// transformers ≥ 5 spellings of rope_theta/rope_scaling and torch_dtype.
		RopeParameters json.RawMessage `json:"rope_parameters"`
		DType          string          `json:"dtype"`
	}
	_ = json.Unmarshal(data, &ids) // already known to be a JSON object
	var err error
	ropeThetaSet := false
	if cfg.Rope, _, err = parseRope("rope_scaling", cfg.RopeScaling, cfg.ropeTypes()); err != nil {
		return nil, err
	}
	cfg.RopeScaling = nil
	if cfg.Gemma != nil && perLayerTypeRope(ids.RopeParameters) {
		if err := gemma3RopeParameters(ids.RopeParameters, cfg); err != nil {
			return nil, err
		}
	} else if len(ids.RopeParameters) > 0 && string(ids.RopeParameters) != "null" {
		rope, theta, err := parseRope("rope_parameters", ids.RopeParameters, cfg.ropeTypes())
		if err != nil {
			return nil, err
		}
		if theta != nil {
			cfg.RopeTheta, ropeThetaSet = *theta, true
		}
		if rope.Type != "" {
			cfg.Rope = rope
		}
	}
	if cfg.TorchDType == "" {
		cfg.TorchDType = ids.DType
	}
	if cfg.BOSTokenID, err = optionalID(ids.BOS); err != nil {
		return nil, fmt.Errorf("config field bos_token_id: %w", err)
	}
	if cfg.EOSTokenIDs, err = idList(ids.EOS); err != nil {
		return nil, fmt.Errorf("config field eos_token_id: %w", err)
	}
	if f := cfg.Family().Defaults; f != nil {
		f(cfg, data, ropeThetaSet)
	}
	if err := parseClassifier(cfg, data); err != nil {
		return nil, err
	}
	if cfg.NumKeyValueHeads == 0 {
		cfg.NumKeyValueHeads = cfg.NumAttentionHeads
	}
	if cfg.HeadDim == 0 {
		cfg.HeadDim = cfg.Family().DefaultHeadDim
	}
	if cfg.HeadDim == 0 && cfg.NumAttentionHeads > 0 {
		cfg.HeadDim = cfg.HiddenSize / cfg.NumAttentionHeads
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func optionalID(raw json.RawMessage) (*int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var id int
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, err
	}
	return &id, nil
}

func idList(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []int
	if raw[0] == '[' {
		err := json.Unmarshal(raw, &list)
		return list, err
	}
	id, err := optionalID(raw)
	if err != nil {
		return nil, err
	}
	return []int{*id}, nil
}

// Validate checks the sizes and refuses features this implementation does not have, naming the
// config.json field.
// MaxLayers bounds num_hidden_layers: real decoders have at most a few hundred (Llama 3.1 405B:
// 126), and a corrupt config with billions would exhaust memory listing the weights.
const MaxLayers = 1024

func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("config field %s: "+format, append([]any{field}, args...)...))
	}
	fam, known := Families[c.ModelType]
	if !known {
		bad("model_type", "%q is not supported (supported: %s)", c.ModelType, quoteList(ModelTypes()))
	}
	if c.AttentionBias && known && !fam.AttentionBiasField {
		bad("attention_bias", "is not a %s option (its q/k/v biases are fixed)", c.ModelType)
	}
	if c.MLPBias && known && !fam.MLPBiasField {
		bad("mlp_bias", "true is not supported by %s (only llama and smollm3 have MLP biases)", c.ModelType)
	}
	if known && fam.Validate != nil {
		fam.Validate(c, bad)
	}
	for i, t := range c.LayerTypes {
		if t != "full_attention" && (t != "sliding_attention" || !fam.Gemma3) {
			if fam.Gemma3 {
				bad("layer_types", "layer %d is %q; supported: \"full_attention\", \"sliding_attention\"", i, t)
			} else {
				bad("layer_types", "layer %d is %q; only \"full_attention\" is supported", i, t)
			}
		}
	}
	if c.LayerTypes != nil && len(c.LayerTypes) != c.NumHiddenLayers {
		bad("layer_types", "has %d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers)
	}
	if err := c.Rope.validate("rope_scaling"); err != nil {
		errs = append(errs, err)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim}} {
		if f.v <= 0 {
			bad(f.name, "must be positive, got %d", f.v)
		}
	}
	if c.NumHiddenLayers > MaxLayers {
		bad("num_hidden_layers", "%d is more than any checkpoint has (at most %d accepted): the weight list alone would exhaust memory", c.NumHiddenLayers, MaxLayers)
	}
	if c.NumKeyValueHeads > 0 && c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		bad("num_key_value_heads", "%d does not divide num_attention_heads %d", c.NumKeyValueHeads, c.NumAttentionHeads)
	}
	if c.HeadDim%2 != 0 {
		bad("head_dim", "rotary embeddings need an even head_dim, got %d", c.HeadDim)
	}
	if c.RMSNormEps <= 0 {
		bad("rms_norm_eps", "must be positive, got %g", c.RMSNormEps)
	}
	if c.RopeTheta <= 0 {
		bad("rope_theta", "must be positive, got %g", c.RopeTheta)
	}
	if len(c.RopeScaling) > 0 && string(c.RopeScaling) != "null" {
		bad("rope_scaling", "%s was not parsed (set Rope; ParseConfig does)", c.RopeScaling)
	}
	if _, ok := ropeKeys[c.Rope.Type]; (!ok || !slices.Contains(c.ropeTypes(), c.Rope.Type)) && c.Rope.Type != "" {
		bad("rope_scaling.rope_type", "%q is not supported (supported: %s)", c.Rope.Type, quoteList(c.ropeTypes()))
	}
	if c.UseSlidingWindow {
		bad("use_sliding_window", "true is not supported")
	}
	if c.HiddenAct != "silu" && !fam.Gemma3 { // Gemma3TextConfig reads hidden_activation instead
		bad("hidden_act", "%q is not supported (only \"silu\")", c.HiddenAct)
	}
	if fam.Gemma3 != (c.Gemma != nil) {
		bad("model_type", "%q needs the Gemma 3 fields exactly when it is gemma3_text (Config.Gemma: set by ParseConfig and Preset)", c.ModelType)
	} else if c.Gemma != nil {
		errs = append(errs, c.Gemma.validate(c)...)
	}
	if c.AttentionDropout != 0 {
		bad("attention_dropout", "%g is not supported (only 0)", c.AttentionDropout)
	}
	if c.UseMRope {
		bad("use_mrope", "true is not supported")
	}
	return oneLine(errs)
}

// oneLine joins errors into one error of one line ("a; b"), so that a config with several bad
// fields is still one line to the user.
func oneLine(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return errors.New(strings.Join(msgs, "; "))
}

// NumGroups is the number of query heads sharing one key/value head (GQA).
func (c *Config) NumGroups() int { return c.NumAttentionHeads / c.NumKeyValueHeads }

// TensorSpec is a weight's HF name and shape (PyTorch layout: linear weights are [out, in]).
type TensorSpec struct {
	Name  string
	Shape []int
}

// Tensors lists the checkpoint's weights in HF order; biases as the family and config say,
// q_norm/k_norm for Qwen3, lm_head.weight only when the head is untied (score.weight instead in a
// classification model).
func (c *Config) Tensors() []TensorSpec {
	d, q, kv, inter := c.HiddenSize, c.NumAttentionHeads*c.HeadDim, c.NumKeyValueHeads*c.HeadDim, c.IntermediateSize
	qkvBias, oBias, mlpBias := c.QKVBias(), c.OBias(), c.MLPBias
	specs := []TensorSpec{{"model.embed_tokens.weight", []int{c.VocabSize, d}}}
	add := func(name string, shape ...int) { specs = append(specs, TensorSpec{name, shape}) }
	linear := func(name string, out, in int, bias bool) {
		add(name+".weight", out, in)
		if bias {
			add(name+".bias", out)
		}
	}
	for i := range c.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p+"input_layernorm.weight", d)
		linear(p+"self_attn.q_proj", q, d, qkvBias)
		linear(p+"self_attn.k_proj", kv, d, qkvBias)
		linear(p+"self_attn.v_proj", kv, d, qkvBias)
		linear(p+"self_attn.o_proj", d, q, oBias)
		qkNormTensors(c, p, add) // Qwen3, Gemma 3 (qwen3.go)
		add(p+"post_attention_layernorm.weight", d)
		gemmaFeedforwardNorms(c, p, add)
		linear(p+"mlp.gate_proj", inter, d, mlpBias)
		linear(p+"mlp.up_proj", inter, d, mlpBias)
		linear(p+"mlp.down_proj", d, inter, mlpBias)
	}
	add("model.norm.weight", d)
	if c.IsClassifier() {
		add(ScoreWeight, c.NumLabels, d)
	} else if !c.TieWordEmbeddings {
		add("lm_head.weight", c.VocabSize, d)
	}
	return specs
}

// NumParameters is the number of weights (tied embeddings counted once).
func (c *Config) NumParameters() int {
	n := 0
	for _, s := range c.Tensors() {
		size := 1
		for _, d := range s.Shape {
			size *= d
		}
		n += size
	}
	return n
}
