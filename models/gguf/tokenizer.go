package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// llama.cpp's token types (enum llama_token_type; gguf-py's TokenType).
const (
	tokenControl     = 3
	tokenUserDefined = 4
)

// byteLevel is tokenizers' ByteLevel step with the options HF's GPT-2-style tokenizers carry.
func byteLevel(addPrefixSpace, trimOffsets bool) map[string]any {
	return map[string]any{"type": "ByteLevel", "add_prefix_space": addPrefixSpace, "trim_offsets": trimOffsets, "use_regex": true}
}

// gpt2PreTokenizer is the HF pre-tokenizer for llama.cpp's tokenizer.ggml.pre: "smollm"
// (llama.cpp's LLAMA_VOCAB_PRE_TYPE_SMOLLM: each \p{N} alone, then GPT-2's regex; SmolLM2's
// tokenizer.json: Digits(individual_digits) then ByteLevel) or "gpt2"/"default" (GPT-2's regex).
func gpt2PreTokenizer(pre string) (any, error) {
	switch pre {
	case "smollm":
		return map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true}, byteLevel(false, true)}}, nil
	case "", "gpt2", "default":
		return byteLevel(false, true), nil
	}
	return nil, fmt.Errorf("gguf: tokenizer.ggml.pre %q is not supported yet (supported: smollm, gpt2, default)", pre)
}

// addedToken is one entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// GPT2Tokenizer rebuilds tokenizer.json and tokenizer_config.json from the metadata of a GGUF
// whose tokenizer.ggml.model is "gpt2" (byte-level BPE): the vocabulary (tokens by id), the merges,
// the added tokens (token_type 3 control → special, 4 user-defined → not special), bos/eos/pad/unk,
// add_bos_token (a TemplateProcessing prefix) and tokenizer.chat_template.
func GPT2Tokenizer(f *File) (tokenizerJSON, configJSON []byte, err error) {
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, nil, err
	}
	if model != "gpt2" {
		return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.model %q is not supported yet (only gpt2, byte-level BPE)", model)
	}
	if v, e := f.Int("tokenizer.ggml.add_space_prefix"); e == nil && v != 0 {
		return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.add_space_prefix true is not supported yet")
	}
	pre, _ := f.String("tokenizer.ggml.pre")
	preTok, err := gpt2PreTokenizer(pre)
	if err != nil {
		return nil, nil, err
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, nil, err
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, nil, err
	}
	types, err := f.Ints("tokenizer.ggml.token_type")
	if err != nil {
		return nil, nil, err
	}
	if len(types) != len(tokens) {
		return nil, nil, fmt.Errorf("gguf: %d token types for %d tokens", len(types), len(tokens))
	}
	vocab := make(map[string]int, len(tokens))
	var added []addedToken
	for id, tok := range tokens {
		if prev, dup := vocab[tok]; dup {
			return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.tokens: token %q is both %d and %d", tok, prev, id)
		}
		vocab[tok] = id
		if types[id] == tokenControl || types[id] == tokenUserDefined {
			added = append(added, addedToken{ID: id, Content: tok, Special: types[id] == tokenControl})
		}
	}
	special := func(key string) (string, int, bool, error) {
		id, e := f.Int(key)
		if e != nil {
			return "", 0, false, nil
		}
		if id < 0 || id >= int64(len(tokens)) {
			return "", 0, false, fmt.Errorf("gguf: metadata %s = %d is not a token id (vocabulary %d)", key, id, len(tokens))
		}
		return tokens[id], int(id), true, nil
	}
	cfg := map[string]any{"tokenizer_class": "GPT2Tokenizer", "add_prefix_space": false,
		"clean_up_tokenization_spaces": false}
	for key, field := range map[string]string{"tokenizer.ggml.bos_token_id": "bos_token", "tokenizer.ggml.eos_token_id": "eos_token",
		"tokenizer.ggml.padding_token_id": "pad_token", "tokenizer.ggml.unknown_token_id": "unk_token"} {
		tok, _, ok, e := special(key)
		if e != nil {
			return nil, nil, e
		}
		if ok {
			cfg[field] = tok
		}
	}
	var post any = byteLevel(true, false)
	if v, e := f.Int("tokenizer.ggml.add_bos_token"); e == nil {
		cfg["add_bos_token"] = v != 0
		if v != 0 {
			bos, id, ok, e := special("tokenizer.ggml.bos_token_id")
			if e != nil || !ok {
				return nil, nil, fmt.Errorf("gguf: tokenizer.ggml.add_bos_token is set without a bos_token_id")
			}
			post = bosTemplate(bos, id)
		}
	}
	if tmpl, e := f.String("tokenizer.chat_template"); e == nil {
		cfg["chat_template"] = tmpl
	}
	if n, e := f.Int("llama.context_length"); e == nil {
		cfg["model_max_length"] = n
	}
	tj := map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer": nil, "pre_tokenizer": preTok, "post_processor": post, "decoder": byteLevel(true, true),
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges}}
	if tokenizerJSON, err = marshal(tj, ""); err != nil {
		return nil, nil, err
	}
	configJSON, err = marshal(cfg, "  ")
	return tokenizerJSON, configJSON, err
}

// marshal writes JSON as the HF files have it: "<|im_start|>", not "\u003c|im_start|\u003e".
func marshal(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	err := enc.Encode(v)
	return b.Bytes(), err
}

// bosTemplate is the TemplateProcessing post-processor that prefixes bos (Llama's "<s> $A").
func bosTemplate(bos string, id int) map[string]any {
	seq := func(s string) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": s, "type_id": 0}}
	}
	tok := map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": 0}}
	return map[string]any{"type": "TemplateProcessing",
		"single":         []any{tok, seq("A")},
		"pair":           []any{tok, seq("A"), tok, seq("B")},
		"special_tokens": map[string]any{bos: map[string]any{"id": bos, "ids": []int{id}, "tokens": []string{bos}}}}
}
