package gguf

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/internal/fsmode"
	"github.com/posttrain/posttrain/models/decoder"
)

// ConvertOptions say how Convert writes the checkpoint.
type ConvertOptions struct {
	// DType is the stored dtype: "F32" (default), "BF16" or "F16".
	DType string
	// Overwrite lets it replace a model posttrain wrote at the output directory before.
	Overwrite bool
	// WrittenBy names the command in the directory's checkpoint mark ("posttrain convert").
	WrittenBy string
}

// freeSpace is fsmode.FreeBytes (a variable for the test of the refusal).
var freeSpace = fsmode.FreeBytes

// storedName is the --dtype name of a stored dtype.
var storedName = map[string]string{"F32": "float32", "BF16": "bfloat16", "F16": "float16"}

// Converted is what Convert wrote.
type Converted struct {
	Config  *decoder.Config
	Tensors int
	Summary string // File.Summary of the input
}

// Convert writes the GGUF at path to dir as a HF checkpoint of its architecture (llama, qwen2,
// qwen3, gemma3; see archs): weights dequantised to float32 (then stored as opts.DType) under HF
// names with llama.cpp's changes undone (Tensors), config.json and generation_config.json from
// the metadata (Config), tokenizer.json and tokenizer_config.json rebuilt from it (Tokenizer).
// dir follows decoder.Save's rules: new or empty, or a model posttrain wrote and opts.Overwrite.
// The conversion streams: each tensor is read, dequantised, written and dropped in turn, so the
// memory it takes is about the largest tensor in float32 and its encoding, not the model; a
// checkpoint that would not fit the free space of dir's filesystem is refused before any of it.
func Convert(path, dir string, opts ConvertOptions) (*Converted, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cfg, err := Config(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	st := opts.DType
	switch st {
	case "", "F32", "float32":
		st = "F32"
	case "BF16", "bfloat16":
		st = "BF16"
	case "F16", "float16":
		st = "F16"
	default:
		return nil, fmt.Errorf("dtype %q is not supported; valid: float32, bfloat16, float16", opts.DType)
	}
	tokJSON, tokCfg, err := Tokenizer(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	weights, err := Tensors(f, cfg, st)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// The checkpoint is written whole before the old one (if any) is replaced: all of it must fit
	// beside what the disk holds now, which is told before anything is dequantised.
	need := int64(len(tokJSON) + len(tokCfg) + 1<<20) // configs, index, headers
	for _, w := range weights {
		n, err := w.ByteSize()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		need += n
	}
	if free, ok := freeSpace(dir); ok && free < need {
		return nil, fmt.Errorf("%s: its conversion to %s needs %.2f GB at %s, whose filesystem has %.2f GB free", path, storedName[st], float64(need)/1e9, dir, float64(free)/1e9)
	}
	tmp, err := os.MkdirTemp("", "gguf-tokenizer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	for name, data := range map[string][]byte{"tokenizer.json": tokJSON, "tokenizer_config.json": tokCfg} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	// The tokenizer rebuilt from the metadata must be one posttrain loads (bad merges, a token
	// that is not UTF-8, special tokens the config names but the vocabulary lacks): refused here,
	// naming the GGUF, rather than written to fail every later command.
	if _, err := tokenizer.Load(tmp); err != nil {
		return nil, fmt.Errorf("%s: the tokenizer rebuilt from its tokenizer.* metadata does not load: %w", path, err)
	}
	gen := &decoder.GenerationConfig{BOSTokenID: cfg.BOSTokenID, EOSTokenIDs: cfg.EOSTokenIDs, PadTokenID: cfg.PadTokenID}
	so := decoder.SaveOptions{DType: st, TokenizerPath: tmp, Generation: gen, Overwrite: opts.Overwrite,
		WrittenBy: opts.WrittenBy, MaxShardBytes: decoder.DefaultMaxShardBytes}
	if err := decoder.SaveTensors(dir, cfg, weights, so); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &Converted{Config: cfg, Tensors: len(weights), Summary: f.Summary()}, nil
}
