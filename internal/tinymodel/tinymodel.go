// Package tinymodel writes tiny random Qwen2 checkpoints with a real (cut-down) Qwen tokenizer and
// a ChatML chat template, for tests and quick CLI runs of the trainers on a CPU.
//
// The tokenizer (files/tokenizer.json) is Qwen's byte-level BPE limited to its 256 byte tokens and
// first NumMerges merges, plus <|endoftext|>, <|im_start|> and <|im_end|> renumbered after them:
// 512 ids, so the LM head is 300× smaller than Qwen's 151,936-row one while the text pipeline
// (pre-tokenizer, BPE, added tokens, chat template) is the real one. The chat template is Qwen2.5's
// without the default system prompt and tool branches, to keep test sequences short.
package tinymodel

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/models/safetensors"
)

// NumMerges is the number of Qwen merges kept: ids 0..255+NumMerges, then the 3 special tokens.
const NumMerges = 253

// VocabSize is the tokenizer's and the model's vocabulary size.
const VocabSize = 256 + NumMerges + 3

var specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// Special token ids.
const (
	EndOfText = 256 + NumMerges + iota
	IMStart
	IMEnd
)

//go:embed files/tokenizer.json
var tokenizerJSON []byte

// ChatTemplate is ChatML as Qwen2.5 renders it for plain user/assistant/system messages.
const ChatTemplate = "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"

// Options size the model; zero fields take the defaults of Default.
type Options struct {
	Hidden, Intermediate, Layers, Heads, KVHeads int
	Seed                                         uint64
}

// Default is a 2-layer model of width 32 (≈ 41k parameters).
var Default = Options{Hidden: 32, Intermediate: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 1}

// Config returns the model configuration of o.
func (o Options) Config() map[string]any {
	return map[string]any{
		"architectures": []string{"Qwen2ForCausalLM"}, "model_type": "qwen2",
		"vocab_size": VocabSize, "hidden_size": o.Hidden, "intermediate_size": o.Intermediate,
		"num_hidden_layers": o.Layers, "num_attention_heads": o.Heads, "num_key_value_heads": o.KVHeads,
		"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true,
		"max_position_embeddings": 4096, "initializer_range": 0.02, "torch_dtype": "float32",
		"bos_token_id": EndOfText, "eos_token_id": IMEnd, "use_sliding_window": false,
		"attention_dropout": 0.0, "rope_scaling": nil, "use_cache": true,
	}
}

func (o Options) withDefaults() Options {
	d := Default
	for _, p := range []struct {
		dst *int
		def int
	}{{&o.Hidden, d.Hidden}, {&o.Intermediate, d.Intermediate},
		{&o.Layers, d.Layers}, {&o.Heads, d.Heads}, {&o.KVHeads, d.KVHeads}} {
		if *p.dst == 0 {
			*p.dst = p.def
		}
	}
	if o.Seed == 0 {
		o.Seed = d.Seed
	}
	return o
}

// Write creates dir (if needed) and writes a random tiny checkpoint into it: config.json,
// generation_config.json, model.safetensors (float32, HF's initialisation from o.Seed),
// tokenizer.json and tokenizer_config.json.
func Write(dir string, o Options) error {
	o = o.withDefaults()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	cfgJSON, err := json.MarshalIndent(o.Config(), "", "  ")
	if err != nil {
		return err
	}
	cfg, err := qwen2.ParseConfig(cfgJSON)
	if err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	ctx := context.New()
	if err := qwen2.InitWeights(ctx, cfg, o.Seed, dtypes.Float32); err != nil {
		return err
	}
	tensors, err := qwen2.ExportWeights(ctx, cfg, "F32")
	if err != nil {
		return err
	}
	if err := safetensors.WriteModelDir(dir, tensors, 0); err != nil {
		return err
	}
	genJSON, _ := json.MarshalIndent(map[string]any{"bos_token_id": EndOfText, "eos_token_id": []int{IMEnd, EndOfText}}, "", "  ")
	files := map[string][]byte{
		qwen2.ConfigFileName:     append(cfgJSON, '\n'),
		"generation_config.json": append(genJSON, '\n'),
		"tokenizer.json":         tokenizerJSON,
		"tokenizer_config.json":  tokenizerConfig(),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("tinymodel: %w", err)
		}
	}
	return nil
}

func tokenizerConfig() []byte {
	decoder := map[string]any{}
	for i, s := range specials {
		decoder[fmt.Sprint(EndOfText+i)] = map[string]any{"content": s, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": true}
	}
	cfg := map[string]any{
		"added_tokens_decoder": decoder, "bos_token": nil, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
		"chat_template": ChatTemplate, "model_max_length": 4096, "tokenizer_class": "Qwen2Tokenizer",
		"errors": "replace", "split_special_tokens": false, "clean_up_tokenization_spaces": false,
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return append(b, '\n')
}
