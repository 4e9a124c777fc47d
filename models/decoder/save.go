package decoder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/safetensors"
)

// DefaultMaxShardBytes is transformers' default max_shard_size ("5GB"): larger checkpoints are
// written as model-0000i-of-0000N.safetensors plus model.safetensors.index.json.
const DefaultMaxShardBytes = 5_000_000_000

// SaveOptions say how Save writes a checkpoint.
type SaveOptions struct {
	// DType is the stored dtype: "F32" (default), "BF16" or "F16" (or float32, bfloat16, float16).
	DType string
	// TokenizerPath, when set, is copied in: a directory with tokenizer.json (or tokenizer.json.gz)
	// and its companions, or a tokenizer.json / tokenizer.json.gz file (with the files beside it).
	TokenizerPath string
	// BaseDir, when set, is the checkpoint this one derives from: the keys of its config.json and
	// generation_config.json that Config does not model are kept.
	BaseDir string
	// Generation sets generation_config.json's ids; nil keeps BaseDir's, else uses cfg's bos/eos.
	Generation *GenerationConfig
	// MaxShardBytes splits the weights into shards above this size; 0 means DefaultMaxShardBytes.
	MaxShardBytes int64
	// Overwrite lets Save and InitCheckpoint replace a model posttrain wrote into dir before (its
	// files only); WrittenBy names the command in dir's checkpoint.ModelMark ("posttrain init").
	Overwrite bool
	WrittenBy string
}

// storedDType maps a dtype spelling to the safetensors one and config.json's torch_dtype.
func storedDType(s string) (st, torch string, err error) {
	switch strings.ToLower(s) {
	case "", "f32", "float32", "fp32":
		return "F32", "float32", nil
	case "bf16", "bfloat16":
		return "BF16", "bfloat16", nil
	case "f16", "float16", "fp16":
		return "F16", "float16", nil
	}
	return "", "", fmt.Errorf("dtype %q is not supported; valid: float32, bfloat16, float16", s)
}

// Save writes the model in ctx to dir as a HF transformers checkpoint: the weights under their HF
// names in opts.DType, config.json (with torch_dtype), generation_config.json and, when given,
// the tokenizer files. dir must be new or empty, or hold a model posttrain wrote and
// opts.Overwrite be set (checkpoint.WriteModel: a new dir is written beside and renamed, a model
// posttrain wrote has only its own files replaced); anything else is refused naming what is there.
func Save(dir string, ctx *context.Context, cfg *Config, opts SaveOptions) error {
	weights, err := storedWeights(ctx, cfg, opts)
	if err != nil {
		return err
	}
	return writeAtomic(dir, cfg.errName(), opts, func(tmp string) error { return writeCheckpoint(tmp, cfg, weights, opts) })
}

// storedWeights are the weights of ctx under their HF names in opts.DType.
func storedWeights(ctx *context.Context, cfg *Config, opts SaveOptions) ([]*safetensors.Tensor, error) {
	st, _, err := storedDType(opts.DType)
	if err != nil {
		return nil, fmt.Errorf("%s save: %w", cfg.errName(), err)
	}
	return ExportWeights(ctx, cfg, st)
}

// SaveTensors is Save for weights already on the host (HF names and PyTorch shapes, stored in
// opts.DType: a converter's output, e.g. models/gguf's), under the same rules for dir.
func SaveTensors(dir string, cfg *Config, weights []*safetensors.Tensor, opts SaveOptions) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s save: %w", cfg.errName(), err)
	}
	return writeAtomic(dir, cfg.errName(), opts, func(tmp string) error { return writeCheckpoint(tmp, cfg, weights, opts) })
}

// WriteModel is Save into an existing directory, without the temporary directory: for callers
// that make the whole directory atomic themselves (internal/checkpoint).
func WriteModel(dir string, ctx *context.Context, cfg *Config, opts SaveOptions) error {
	weights, err := storedWeights(ctx, cfg, opts)
	if err != nil {
		return err
	}
	return writeCheckpoint(dir, cfg, weights, opts)
}

// writeCheckpoint writes weights, configs and tokenizer files into dir.
func writeCheckpoint(dir string, cfg *Config, weights []*safetensors.Tensor, opts SaveOptions) error {
	_, torch, err := storedDType(opts.DType)
	if err != nil {
		return fmt.Errorf("%s save: %w", cfg.errName(), err)
	}
	shard := opts.MaxShardBytes
	if shard <= 0 {
		shard = DefaultMaxShardBytes
	}
	if err := safetensors.WriteModelDir(dir, weights, shard); err != nil {
		return fmt.Errorf("%s save: %w", cfg.errName(), err)
	}
	conf, err := configJSON(cfg, opts.BaseDir, torch)
	if err != nil {
		return err
	}
	gen, err := generationJSON(cfg, opts)
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{ConfigFileName: conf, GenerationConfigFileName: gen} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("%s save: %w", cfg.errName(), err)
		}
	}
	if opts.TokenizerPath != "" {
		return copyTokenizer(dir, opts.TokenizerPath, cfg.errName())
	}
	return nil
}

// readJSONObject reads a JSON object keeping numbers as written; a missing file gives an empty map.
// name starts its errors (Config.errName).
func readJSONObject(path, name string) (map[string]any, error) {
	m := map[string]any{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s save: %w", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s save: %s: %w", name, path, err)
	}
	return m, nil
}

// idJSON is eos_token_id as HF writes it: one id, or a list when there are several.
func idJSON(ids []int) any {
	if len(ids) == 1 {
		return ids[0]
	}
	return ids
}

// TransformersVersion is what config.json and generation_config.json say wrote them when their
// base checkpoint says nothing (posttrain init, convert): the transformers release posttrain's
// checkpoints are tested against (scripts/reference-env.sh). Without the key transformers
// assumes an old file and warns on loading (its tokenizer's "incorrect regex pattern" check).
const TransformersVersion = "4.57.6"

// configJSON is config.json for cfg: baseDir's keys, overwritten by every field cfg models.
func configJSON(cfg *Config, baseDir, torchDType string) ([]byte, error) {
	m := map[string]any{}
	if baseDir != "" {
		var err error
		if m, err = readJSONObject(filepath.Join(baseDir, ConfigFileName), cfg.errName()); err != nil {
			return nil, err
		}
	}
	set := map[string]any{
		"architectures": []string{cfg.Family().Architecture}, "model_type": cfg.ModelType,
		"vocab_size": cfg.VocabSize, "hidden_size": cfg.HiddenSize, "intermediate_size": cfg.IntermediateSize,
		"num_hidden_layers": cfg.NumHiddenLayers, "num_attention_heads": cfg.NumAttentionHeads,
		"num_key_value_heads": cfg.NumKeyValueHeads, "rms_norm_eps": cfg.RMSNormEps, "rope_theta": cfg.RopeTheta,
		"tie_word_embeddings": cfg.TieWordEmbeddings, "max_position_embeddings": cfg.MaxPositionEmbeddings,
		"hidden_act": cfg.HiddenAct, "initializer_range": cfg.InitializerRange, "torch_dtype": torchDType,
		"attention_dropout": 0.0, "rope_scaling": cfg.Rope.ropeJSON(), "use_cache": true,
	}
	for k, v := range set {
		m[k] = v
	}
	familyConfigJSON(m, cfg)
	classifierConfigJSON(m, cfg)
	setDefault(m, "transformers_version", TransformersVersion)
	delete(m, "bos_token_id")
	delete(m, "eos_token_id")
	if cfg.BOSTokenID != nil {
		m["bos_token_id"] = *cfg.BOSTokenID
	}
	if len(cfg.EOSTokenIDs) > 0 {
		m["eos_token_id"] = idJSON(cfg.EOSTokenIDs)
	}
	return marshalConfig(m, cfg.errName())
}

// familyConfigJSON sets the keys of config.json that differ between the families, as their
// transformers configuration classes write them (Family.ConfigJSON, in each family's file).
func familyConfigJSON(m map[string]any, cfg *Config) {
	if f := cfg.Family().ConfigJSON; f != nil {
		f(m, cfg)
	}
}

// setDefault sets m[k] = v unless m has k (a key a base checkpoint's config.json already holds).
func setDefault(m map[string]any, k string, v any) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// generationJSON is generation_config.json: opts.Generation's ids, else BaseDir's file, else
// cfg's bos/eos.
func generationJSON(cfg *Config, opts SaveOptions) ([]byte, error) {
	m := map[string]any{}
	if opts.BaseDir != "" {
		var err error
		if m, err = readJSONObject(filepath.Join(opts.BaseDir, GenerationConfigFileName), cfg.errName()); err != nil {
			return nil, err
		}
	}
	gc := opts.Generation
	if gc == nil && len(m) == 0 {
		gc = &GenerationConfig{BOSTokenID: cfg.BOSTokenID, EOSTokenIDs: cfg.EOSTokenIDs}
	}
	if gc != nil {
		for _, k := range []string{"bos_token_id", "eos_token_id", "pad_token_id"} {
			delete(m, k)
		}
		if gc.BOSTokenID != nil {
			m["bos_token_id"] = *gc.BOSTokenID
		}
		if len(gc.EOSTokenIDs) > 0 {
			m["eos_token_id"] = idJSON(gc.EOSTokenIDs)
		}
		if gc.PadTokenID != nil {
			m["pad_token_id"] = *gc.PadTokenID
		}
	}
	setDefault(m, "transformers_version", TransformersVersion)
	return marshalConfig(m, cfg.errName())
}

// marshalConfig writes a config map as transformers does: sorted keys, two-space indent.
func marshalConfig(m map[string]any, name string) ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s save: %w", name, err)
	}
	return append(data, '\n'), nil
}

// writeAtomic writes the checkpoint fill makes into dir under checkpoint.WriteModel's rules.
// name starts its errors.
func writeAtomic(dir, name string, opts SaveOptions, fill func(tmp string) error) error {
	by := opts.WrittenBy
	if by == "" {
		by = "posttrain"
	}
	if err := checkpoint.WriteModel(dir, by, opts.Overwrite, fill); err != nil {
		return fmt.Errorf("%s save: %w", name, err)
	}
	return nil
}
