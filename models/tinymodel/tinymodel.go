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
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/posttrain/posttrain/models/decoder"
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

// The tokenizer files, also usable as `posttrain init --preset tiny --tokenizer models/tinymodel/files`.
var (
	//go:embed files/tokenizer.json
	tokenizerJSON []byte
	//go:embed files/tokenizer_config.json
	tokenizerConfigJSON []byte
)

// ChatTemplate is ChatML as Qwen2.5 renders it for plain user/assistant/system messages.
const ChatTemplate = "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"

// Options size the model; zero fields take the defaults of Default.
type Options struct {
	Hidden, Intermediate, Layers, Heads, KVHeads int
	Seed                                         uint64
	// InitRange is the std of the random weights (0: HF's 0.02, which makes a near-uniform model
	// whose greedy answers hardly depend on the prompt; tests of prompt handling use ~1).
	InitRange float64
}

// Default is a 2-layer model of width 32 (≈ 41k parameters).
var Default = Options{Hidden: 32, Intermediate: 64, Layers: 2, Heads: 4, KVHeads: 2, Seed: 1}

// Config returns the model configuration of o (zero fields from Default).
func (o Options) Config() *decoder.Config {
	o = o.withDefaults()
	bos := EndOfText
	return &decoder.Config{ModelType: "qwen2", VocabSize: VocabSize, HiddenSize: o.Hidden,
		IntermediateSize: o.Intermediate, NumHiddenLayers: o.Layers, NumAttentionHeads: o.Heads,
		NumKeyValueHeads: o.KVHeads, HeadDim: o.Hidden / o.Heads, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, MaxPositionEmbeddings: 4096, HiddenAct: "silu", TorchDType: "float32",
		InitializerRange: o.InitRange, BOSTokenID: &bos, EOSTokenIDs: []int{IMEnd}}
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
	if o.InitRange == 0 {
		o.InitRange = 0.02
	}
	return o
}

// Write writes a random tiny checkpoint into dir with decoder.InitCheckpoint (HF's initialisation
// from o.Seed, float32): model.safetensors, config.json, generation_config.json (eos
// <|im_end|> and <|endoftext|>, as Qwen2.5-Instruct), tokenizer.json and tokenizer_config.json.
func Write(dir string, o Options) error {
	o = o.withDefaults()
	cfg := o.Config()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	tok, err := os.MkdirTemp("", "tinymodel-tokenizer-")
	if err != nil {
		return fmt.Errorf("tinymodel: %w", err)
	}
	defer os.RemoveAll(tok)
	if err := WriteTokenizer(tok); err != nil {
		return err
	}
	bos := EndOfText
	gen := &decoder.GenerationConfig{BOSTokenID: &bos, EOSTokenIDs: []int{IMEnd, EndOfText}}
	return decoder.InitCheckpoint(dir, cfg, o.Seed, decoder.SaveOptions{TokenizerPath: tok, Generation: gen})
}

// WriteTokenizer writes the tokenizer files (tokenizer.json, tokenizer_config.json) into the
// existing directory dir: beside a checkpoint of VocabSize ids of any family, such as the tiny
// Qwen3 and Llama fixtures of models/testdata.
func WriteTokenizer(dir string) error {
	for name, data := range map[string][]byte{"tokenizer.json": tokenizerJSON, "tokenizer_config.json": tokenizerConfigJSON} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("tinymodel: %w", err)
		}
	}
	return nil
}

// tokenizerConfig is files/tokenizer_config.json: Qwen's special tokens and ChatTemplate.
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
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	_ = enc.Encode(cfg)
	return buf.Bytes()
}
