package gguf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/posttrain/posttrain/models/decoder"
)

// exportTokenizer is the tokenizer.* metadata of an export and what the Modelfile needs.
type exportTokenizer struct {
	kvs      []KV
	n        int // tokens written
	template string
	stops    []string
}

// hfTokenizerJSON is the part of tokenizer.json the export reads.
type hfTokenizerJSON struct {
	AddedTokens []struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		Special    bool   `json:"special"`
		Normalized bool   `json:"normalized"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type         string            `json:"type"`
		ByteFallback bool              `json:"byte_fallback"`
		Vocab        map[string]int    `json:"vocab"`
		Merges       []json.RawMessage `json:"merges"`
	} `json:"model"`
}

// exportPres are the llama.cpp pre-tokenizers whose HF pipeline the importer knows (bpePipeline),
// tried in this order against tokenizer.json's normalizer and pre_tokenizer.
var exportPres = []string{"qwen2", "llama-bpe", "smollm", "gpt2"}

// tokenizerPre names llama.cpp's tokenizer.ggml.pre for tokenizer.json's pipeline. llama.cpp's
// converter tells them by the hash of a test string's ids (get_vocab_base_pre); a GGUF needs only
// the name, so this compares the pipeline with each known one.
func tokenizerPre(tj *hfTokenizerJSON) (string, error) {
	norm := func(raw json.RawMessage) any {
		var v any
		if len(raw) > 0 {
			_ = json.Unmarshal(raw, &v)
		}
		return v
	}
	gotNorm, gotPre := norm(tj.Normalizer), norm(tj.PreTokenizer)
	for _, pre := range exportPres {
		n, p, _, _, _, err := bpePipeline(pre)
		if err != nil {
			return "", err
		}
		wantNorm, _ := json.Marshal(n)
		wantPre, _ := json.Marshal(p)
		if reflect.DeepEqual(gotNorm, norm(wantNorm)) && reflect.DeepEqual(gotPre, norm(wantPre)) {
			return pre, nil
		}
	}
	return "", fmt.Errorf("its normalizer and pre_tokenizer are none of llama.cpp's pre-tokenizers %s (Qwen2, Llama 3, SmolLM, GPT-2)", strings.Join(exportPres, ", "))
}

// readExportTokenizer builds tokenizer.* from dir's tokenizer.json and tokenizer_config.json the
// way convert_hf_to_gguf.py's _set_vocab_gpt2 and gguf-py's SpecialVocab do for a byte-level BPE
// tokenizer: tokens and types by id (tokenList: up to vocab_size; Gemma 3 to the tokenizer's
// size, its embedding cut to match), merges as "a b", the pre-tokenizer
// (tokenizerPre), bos/eos/unk/pad ids (tokenizer_config.json's tokens, else config.json's ids),
// add_bos_token/add_eos_token (a TemplateProcessing post-processor, else tokenizer_config.json),
// and the chat template. Gemma's SentencePiece-style BPE (byte fallback) is spmTokenizer's.
func readExportTokenizer(dir string, cfg *decoder.Config, arch string) (*exportTokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var tj hfTokenizerJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	tc, err := readTokenizerConfig(dir)
	if err != nil {
		return nil, err
	}
	var out *exportTokenizer
	if isSPMStyle(&tj) {
		if out, err = spmTokenizer(&tj, tc, cfg, arch); err != nil {
			return nil, fmt.Errorf("tokenizer %s: %w", path, err)
		}
	} else if out, err = bpeTokenizer(&tj, tc, cfg, arch); err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	if arch == "llama" {
		if v, ok := tc["add_prefix_space"].(bool); ok { // LlamaModel.set_vocab
			out.kvs = append(out.kvs, KV{"tokenizer.ggml.add_space_prefix", TypeBool, v})
		}
	}
	if out.template, err = chatTemplate(dir, tc); err != nil {
		return nil, err
	}
	if out.template != "" {
		out.kvs = append(out.kvs, KV{"tokenizer.chat_template", TypeString, out.template})
	}
	out.stops = stopTokens(out.template, tokenName(tc["eos_token"]))
	return out, nil
}

// bpeTokenizer is readExportTokenizer's byte-level BPE case (tokenizer.ggml.model gpt2).
func bpeTokenizer(tj *hfTokenizerJSON, tc map[string]any, cfg *decoder.Config, arch string) (*exportTokenizer, error) {
	if tj.Model.Type != "BPE" || tj.Model.ByteFallback {
		return nil, fmt.Errorf("only byte-level BPE tokenizers (tokenizer.ggml.model gpt2) and Gemma's SentencePiece-style BPE (llama) can be exported; this one is %s with byte_fallback %v and another pipeline", tj.Model.Type, tj.Model.ByteFallback)
	}
	pre, err := tokenizerPre(tj)
	if err != nil {
		return nil, err
	}
	n := cfg.VocabSize
	if arch == "gemma3" {
		n = len(tj.Model.Vocab) + len(tj.AddedTokens)
	}
	tokens, types, err := tokenList(tj, cfg.VocabSize, n)
	if err != nil {
		return nil, err
	}
	merges := make([]any, len(tj.Model.Merges))
	for i, m := range tj.Model.Merges {
		var s string
		var pair []string
		switch {
		case json.Unmarshal(m, &s) == nil:
		case json.Unmarshal(m, &pair) == nil && len(pair) == 2:
			// SpecialVocab: a space inside a part is written as U+0120 (Ġ), as byte-level BPE spells it
			s = strings.ReplaceAll(pair[0], " ", "\u0120") + " " + strings.ReplaceAll(pair[1], " ", "\u0120")
		default:
			return nil, fmt.Errorf("merge %d is %s, not \"a b\" or [a, b]", i, m)
		}
		merges[i] = s
	}
	out := &exportTokenizer{n: n, kvs: []KV{
		{"tokenizer.ggml.model", TypeString, "gpt2"}, {"tokenizer.ggml.pre", TypeString, pre},
		{"tokenizer.ggml.tokens", TypeArray, Array{TypeString, tokens}},
		{"tokenizer.ggml.token_type", TypeArray, Array{TypeInt32, types}},
		{"tokenizer.ggml.merges", TypeArray, Array{TypeString, merges}},
	}}
	if err := out.specials(tj, tc, cfg); err != nil {
		return nil, err
	}
	return out, nil
}

// tokenList is get_vocab_base's tokens and token types for ids 0..n−1: the tokenizer's token, or
// "[PAD<i>]" (UNUSED) for an id it lacks; added tokens that are special or look special CONTROL,
// other added ones USER_DEFINED (with "▁" as " ", llama.cpp's pre-normalisation), the rest NORMAL.
func tokenList(tj *hfTokenizerJSON, vocabSize, n int) (tokens, types []any, err error) {
	byID := map[int]string{}
	for s, id := range tj.Model.Vocab {
		byID[id] = s
	}
	added, special := map[int]bool{}, map[int]bool{}
	for _, a := range tj.AddedTokens {
		byID[a.ID], added[a.ID] = a.Content, true
		special[a.ID] = a.Special || looksSpecial(a.Content)
	}
	for id := range byID {
		if id < 0 || id >= vocabSize {
			return nil, nil, fmt.Errorf("token id %d is outside the model's vocab_size %d", id, vocabSize)
		}
	}
	tokens, types = make([]any, n), make([]any, n)
	for id := range n {
		tok, ok := byID[id]
		switch {
		case !ok:
			tokens[id], types[id] = fmt.Sprintf("[PAD%d]", id), int32(5) // UNUSED
		case special[id]:
			tokens[id], types[id] = tok, int32(tokenControl)
		case added[id]:
			tokens[id], types[id] = strings.ReplaceAll(tok, "▁", " "), int32(tokenUserDefined)
		default:
			tokens[id], types[id] = tok, int32(tokenNormal)
		}
	}
	return tokens, types, nil
}

// looksSpecial is convert_hf_to_gguf.py's does_token_look_special.
func looksSpecial(t string) bool {
	switch t {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(t, "<|") && strings.HasSuffix(t, "|>") ||
		strings.HasPrefix(t, "<｜") && strings.HasSuffix(t, "｜>") ||
		strings.HasPrefix(t, "<unused") && strings.HasSuffix(t, ">")
}

func readTokenizerConfig(dir string) (map[string]any, error) {
	path := filepath.Join(dir, "tokenizer_config.json")
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var tc map[string]any
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	return tc, nil
}

// tokenName is a tokenizer_config.json token entry: a string or {"content": …}.
func tokenName(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		s, _ := x["content"].(string)
		return s
	}
	return ""
}

// specials adds the bos/eos/unk/pad ids and add_bos/add_eos as gguf-py's SpecialVocab finds
// them, in its order: the post-processor first (ByteLevel: add neither; TemplateProcessing: bos
// when its single template starts with the bos token), then tokenizer_config.json's <typ>_token
// (an added token) and add_<typ>_token, then config.json's <typ>_token_id for what is still unset.
func (out *exportTokenizer) specials(tj *hfTokenizerJSON, tc map[string]any, cfg *decoder.Config) error {
	addFlags := map[string]bool{}
	var pp struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
	}
	if len(tj.PostProcessor) > 0 && string(tj.PostProcessor) != "null" {
		if err := json.Unmarshal(tj.PostProcessor, &pp); err != nil {
			return fmt.Errorf("post_processor: %w", err)
		}
		procs := pp.Processors
		if pp.Type != "Sequence" {
			procs = []json.RawMessage{tj.PostProcessor}
		}
		for _, raw := range procs {
			postProcessorFlags(raw, tc, addFlags)
		}
	}
	types := []string{"bos", "eos", "unk", "pad"}
	var order []string
	ids := map[string]int{}
	setID := func(typ string, id int) {
		if _, done := ids[typ]; !done && id >= 0 && id < cfg.VocabSize {
			ids[typ] = id
			order = append(order, typ)
		}
	}
	for _, typ := range types {
		if v, ok := tc["add_"+typ+"_token"].(bool); ok {
			if _, set := addFlags[typ]; !set {
				addFlags[typ] = v
			}
		}
		if name := tokenName(tc[typ+"_token"]); name != "" {
			for _, a := range tj.AddedTokens {
				if a.Content == name {
					setID(typ, a.ID)
					break
				}
			}
		}
	}
	if cfg.BOSTokenID != nil {
		setID("bos", *cfg.BOSTokenID)
	}
	if len(cfg.EOSTokenIDs) > 0 {
		setID("eos", cfg.EOSTokenIDs[0])
	}
	if cfg.PadTokenID != nil {
		setID("pad", *cfg.PadTokenID)
	}
	keys := map[string]string{"bos": "bos_token_id", "eos": "eos_token_id", "unk": "unknown_token_id", "pad": "padding_token_id"}
	for _, typ := range order {
		out.kvs = append(out.kvs, KV{"tokenizer.ggml." + keys[typ], TypeUint32, uint32(ids[typ])})
	}
	for _, typ := range []string{"bos", "eos"} {
		v, ok := addFlags[typ]
		if !ok {
			continue
		}
		if v && typ == "eos" {
			return fmt.Errorf("add_eos_token true is not supported (the importer refuses it too)")
		}
		if _, has := ids[typ]; v && !has {
			return fmt.Errorf("add_%s_token is set but there is no %s token", typ, typ)
		}
		out.kvs = append(out.kvs, KV{"tokenizer.ggml.add_" + typ + "_token", TypeBool, v})
	}
	return nil
}

// postProcessorFlags applies one post-processor step to the add_bos/add_eos flags as SpecialVocab
// does: ByteLevel defaults both to false; TemplateProcessing adds bos when its single template
// starts with the bos token and eos when it ends with the eos token.
func postProcessorFlags(raw json.RawMessage, tc map[string]any, flags map[string]bool) {
	var p struct {
		Type   string `json:"type"`
		Single []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	}
	if json.Unmarshal(raw, &p) != nil {
		return
	}
	switch p.Type {
	case "ByteLevel":
		for _, typ := range []string{"bos", "eos"} {
			if _, set := flags[typ]; !set {
				flags[typ] = false
			}
		}
	case "TemplateProcessing":
		if len(p.Single) < 2 {
			return
		}
		if st := p.Single[0].SpecialToken; st != nil {
			bos := tokenName(tc["bos_token"])
			flags["bos"] = st.ID == bos || bos == ""
		}
		if st := p.Single[len(p.Single)-1].SpecialToken; st != nil {
			flags["eos"] = st.ID == tokenName(tc["eos_token"])
		}
	}
}

// chatTemplate is tokenizer_config.json's chat_template (a string), else chat_template.jinja;
// a list of named templates takes the "default" one.
func chatTemplate(dir string, tc map[string]any) (string, error) {
	switch t := tc["chat_template"].(type) {
	case string:
		return t, nil
	case []any:
		for _, e := range t {
			if m, ok := e.(map[string]any); ok && m["name"] == "default" {
				s, _ := m["template"].(string)
				return s, nil
			}
		}
	}
	data, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	if err == nil {
		return string(data), nil
	}
	if !os.IsNotExist(err) {
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	return "", nil
}
