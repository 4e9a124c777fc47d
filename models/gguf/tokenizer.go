package gguf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// llama.cpp's token types (enum llama_token_type; gguf-py's TokenType).
const (
	tokenNormal      = 1
	tokenControl     = 3
	tokenUserDefined = 4
)

// byteLevel is tokenizers' ByteLevel step with the options HF's GPT-2-style tokenizers carry.
func byteLevel(addPrefixSpace, trimOffsets, useRegex bool) map[string]any {
	return map[string]any{"type": "ByteLevel", "add_prefix_space": addPrefixSpace, "trim_offsets": trimOffsets, "use_regex": useRegex}
}

// The Split regexes of HF's Qwen2 and Llama 3 tokenizer.json (llama.cpp's pre-tokenizers "qwen2"
// and "llama-bpe", llama-vocab.cpp).
const (
	qwen2Regex  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// bpePipeline is the HF pipeline for a byte-level BPE GGUF (tokenizer.ggml.model "gpt2") with
// llama.cpp's tokenizer.ggml.pre, as the original tokenizer.json of each family has it:
//   - "smollm" (SmolLM2): Digits(individual_digits) then GPT-2's ByteLevel regex;
//   - "gpt2", "default": GPT-2's ByteLevel regex;
//   - "qwen2" (Qwen2, Qwen2.5, Qwen3): NFC, then Qwen's Split regex and ByteLevel without regex;
//   - "llama-bpe" (Llama 3.x): Llama 3's Split regex and ByteLevel without regex, ignore_merges.
func bpePipeline(pre string) (normalizer, preTok, post, decoder any, ignoreMerges bool, err error) {
	split := func(re string) map[string]any {
		return map[string]any{"type": "Split", "pattern": map[string]any{"Regex": re}, "behavior": "Isolated", "invert": false}
	}
	seq := func(steps ...any) map[string]any { return map[string]any{"type": "Sequence", "pretokenizers": steps} }
	switch pre {
	case "smollm":
		return nil, seq(map[string]any{"type": "Digits", "individual_digits": true}, byteLevel(false, true, true)),
			byteLevel(true, false, true), byteLevel(true, true, true), false, nil
	case "", "gpt2", "default":
		return nil, byteLevel(false, true, true), byteLevel(true, false, true), byteLevel(true, true, true), false, nil
	case "qwen2":
		return map[string]any{"type": "NFC"}, seq(split(qwen2Regex), byteLevel(false, false, false)),
			byteLevel(false, false, false), byteLevel(false, false, false), false, nil
	case "llama-bpe":
		return nil, seq(split(llama3Regex), byteLevel(false, true, false)),
			byteLevel(true, false, true), byteLevel(true, true, true), true, nil
	}
	return nil, nil, nil, nil, false, fmt.Errorf("gguf: metadata tokenizer.ggml.pre: %q is not supported yet (supported: smollm, gpt2, default, qwen2, llama-bpe)", pre)
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

// vocabMeta is the vocabulary part of tokenizer.ggml.*: tokens by id and their types.
type vocabMeta struct {
	tokens []string
	types  []int64
}

// MaxTokenBytes bounds a vocabulary entry's length. The longest of the released vocabularies read
// here is 162 bytes (SmolLM2's; Gemma 3's is 48); rebuilding SentencePiece merges costs the square
// of a token's length, so a hostile megabyte-long token would run for minutes.
const MaxTokenBytes = 1024

func readVocab(f *File) (*vocabMeta, error) {
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	types, err := f.Ints("tokenizer.ggml.token_type")
	if err != nil {
		return nil, err
	}
	if len(types) != len(tokens) {
		return nil, fmt.Errorf("gguf: metadata tokenizer.ggml.token_type has %d entries for %d tokens", len(types), len(tokens))
	}
	for id, tok := range tokens {
		if len(tok) > MaxTokenBytes {
			return nil, fmt.Errorf("gguf: metadata tokenizer.ggml.tokens: token %d is %d bytes long; at most %d are accepted", id, len(tok), MaxTokenBytes)
		}
	}
	return &vocabMeta{tokens, types}, nil
}

// vocab maps tokens to ids, refusing a token listed twice; added are the control (special) and
// user-defined (not special) tokens, as HF's tokenizer.json lists them.
func (v *vocabMeta) vocab() (map[string]int, []addedToken, error) {
	vocab := make(map[string]int, len(v.tokens))
	var added []addedToken
	for id, tok := range v.tokens {
		if prev, dup := vocab[tok]; dup {
			return nil, nil, fmt.Errorf("gguf: metadata tokenizer.ggml.tokens: token %q is both %d and %d", tok, prev, id)
		}
		vocab[tok] = id
		if t := v.types[id]; t == tokenControl || t == tokenUserDefined {
			added = append(added, addedToken{ID: id, Content: tok, Special: t == tokenControl})
		}
	}
	return vocab, added, nil
}

// Tokenizer rebuilds tokenizer.json and tokenizer_config.json from the metadata of a GGUF: the
// vocabulary (tokens by id), the merges, the added tokens (token_type 3 control → special, 4
// user-defined → not special), bos/eos/pad/unk, add_bos_token (a TemplateProcessing prefix) and
// tokenizer.chat_template. tokenizer.ggml.model "gpt2" is byte-level BPE (bpePipeline), "llama"
// SentencePiece BPE with byte fallback (sentencePiece).
func Tokenizer(f *File) (tokenizerJSON, configJSON []byte, err error) {
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, nil, err
	}
	v, err := readVocab(f)
	if err != nil {
		return nil, nil, err
	}
	cfg := map[string]any{"clean_up_tokenization_spaces": false}
	var tj map[string]any
	switch model {
	case "gpt2":
		tj, err = gpt2Tokenizer(f, v, cfg)
	case "llama":
		tj, err = sentencePiece(f, v, cfg)
	default:
		err = fmt.Errorf("gguf: metadata tokenizer.ggml.model: %q is not supported yet (supported: gpt2, llama)", model)
	}
	if err != nil {
		return nil, nil, err
	}
	special := func(key string) (string, int, bool, error) {
		id, ok, e := optInt(f, key)
		if e != nil || !ok {
			return "", 0, false, e
		}
		if id < 0 || id >= int64(len(v.tokens)) {
			return "", 0, false, fmt.Errorf("gguf: metadata %s = %d is not a token id (vocabulary %d)", key, id, len(v.tokens))
		}
		return v.tokens[id], int(id), true, nil
	}
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
	addBOS, hasAddBOS, err := optInt(f, "tokenizer.ggml.add_bos_token")
	if err != nil {
		return nil, nil, err
	}
	if v := addBOS; hasAddBOS {
		cfg["add_bos_token"] = v != 0
		if v != 0 {
			bos, id, ok, e := special("tokenizer.ggml.bos_token_id")
			if e != nil || !ok {
				return nil, nil, fmt.Errorf("gguf: metadata tokenizer.ggml.add_bos_token is set without a tokenizer.ggml.bos_token_id")
			}
			tj["post_processor"] = bosTemplate(bos, id)
		}
	}
	if v, _, e := optInt(f, "tokenizer.ggml.add_eos_token"); e != nil {
		return nil, nil, e
	} else if v != 0 {
		return nil, nil, fmt.Errorf("gguf: metadata tokenizer.ggml.add_eos_token true is not supported yet")
	}
	if tmpl, ok, e := optString(f, "tokenizer.chat_template"); e != nil {
		return nil, nil, e
	} else if ok {
		cfg["chat_template"] = tmpl
	}
	if arch, e := f.String("general.architecture"); e == nil {
		if n, ok, e := optInt(f, arch+".context_length"); e != nil {
			return nil, nil, e
		} else if ok {
			cfg["model_max_length"] = n
		}
	}
	if tokenizerJSON, err = marshal(tj, ""); err != nil {
		return nil, nil, err
	}
	configJSON, err = marshal(cfg, "  ")
	return tokenizerJSON, configJSON, err
}

// gpt2Tokenizer is tokenizer.json for tokenizer.ggml.model "gpt2": byte-level BPE with
// tokenizer.ggml.merges ("a b" each) and the pipeline of tokenizer.ggml.pre.
func gpt2Tokenizer(f *File, v *vocabMeta, cfg map[string]any) (map[string]any, error) {
	if n, _, e := optInt(f, "tokenizer.ggml.add_space_prefix"); e != nil {
		return nil, e
	} else if n != 0 {
		return nil, fmt.Errorf("gguf: metadata tokenizer.ggml.add_space_prefix true is not supported with tokenizer.ggml.model gpt2")
	}
	pre, _, err := optString(f, "tokenizer.ggml.pre")
	if err != nil {
		return nil, err
	}
	norm, preTok, post, dec, ignoreMerges, err := bpePipeline(pre)
	if err != nil {
		return nil, err
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, err
	}
	vocab, added, err := v.vocab()
	if err != nil {
		return nil, err
	}
	cfg["tokenizer_class"] = "GPT2Tokenizer"
	if pre == "qwen2" {
		cfg["tokenizer_class"] = "Qwen2Tokenizer"
	}
	cfg["add_prefix_space"] = false
	return map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer": norm, "pre_tokenizer": preTok, "post_processor": post, "decoder": dec,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": ignoreMerges,
			"vocab": vocab, "merges": merges}}, nil
}

// sentencePiece is tokenizer.json for tokenizer.ggml.model "llama" (a SentencePiece BPE model) as
// transformers' GemmaConverter builds it from the tokenizer.model llama.cpp read: BPE with byte
// fallback and <unk>, the normalizer Replace(" ", "▁"), Split(" ", MergedWithPrevious), the
// decoder Replace("▁", " ") · ByteFallback · Fuse. What llama.cpp's _create_vocab_sentencepiece
// changed is undone first: a user-defined token's "▁" it pre-normalised to " " (Gemma's runs of
// spaces), and the score -1000 it gives the added tokens (SentencePiece's is 0). The merges are
// then generate_merges' (spmMerges) from the vocabulary and the scores, since a SentencePiece
// GGUF stores none. On Gemma 3 this gives back the original tokenizer.json's vocabulary and all
// its 514,906 merges in order (TestConvert_RealGemma3).
//
// Only tokenizer.ggml.add_space_prefix false (Gemma 3) is supported: Llama 2's true needs the
// Prepend("▁") normalizer and a Strip decoder that no checked GGUF exercises yet.
func sentencePiece(f *File, v *vocabMeta, cfg map[string]any) (map[string]any, error) {
	if n, e := f.Int("tokenizer.ggml.add_space_prefix"); e != nil || n != 0 {
		return nil, fmt.Errorf("gguf: metadata tokenizer.ggml.add_space_prefix: only false is supported with tokenizer.ggml.model llama (Gemma 3's), not absent or true (Llama 2's) yet")
	}
	scores, err := f.Float32s("tokenizer.ggml.scores")
	if err != nil {
		return nil, err
	}
	if len(scores) != len(v.tokens) {
		return nil, fmt.Errorf("gguf: metadata tokenizer.ggml.scores has %d entries for %d tokens", len(scores), len(v.tokens))
	}
	sv := &vocabMeta{tokens: make([]string, len(v.tokens)), types: v.types}
	spScores := make([]float32, len(scores))
	for id, tok := range v.tokens {
		sv.tokens[id], spScores[id] = tok, scores[id]
		switch v.types[id] {
		case tokenUserDefined:
			sv.tokens[id] = strings.ReplaceAll(tok, " ", "▁")
			spScores[id] = 0
		case tokenControl:
			spScores[id] = 0
		}
	}
	vocab, added, err := sv.vocab()
	if err != nil {
		return nil, err
	}
	unk, err := f.Int("tokenizer.ggml.unknown_token_id")
	if err != nil {
		return nil, err
	}
	if unk < 0 || unk >= int64(len(sv.tokens)) {
		return nil, fmt.Errorf("gguf: metadata tokenizer.ggml.unknown_token_id = %d is not a token id (vocabulary %d)", unk, len(sv.tokens))
	}
	cfg["tokenizer_class"] = "GemmaTokenizer"
	cfg["add_eos_token"] = false
	replace := func(from, to string) map[string]any {
		return map[string]any{"type": "Replace", "pattern": map[string]any{"String": from}, "content": to}
	}
	return map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer":     replace(" ", "▁"),
		"pre_tokenizer":  map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "MergedWithPrevious", "invert": false},
		"post_processor": nil,
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{replace("▁", " "),
			map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"}}},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": sv.tokens[unk], "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
			"vocab": vocab, "merges": spmMerges(sv.tokens, spScores, vocab)}}, nil
}

// spmMerges is transformers' generate_merges(vocab, vocab_scores) (convert_slow_tokenizer.py),
// the BPE merges of a SentencePiece BPE vocabulary: for each token in id order, every split into
// two tokens of the vocabulary (at a character boundary), ordered by the ids of the left then the
// right part; then all of them stably sorted by the token's score, the left part's length and
// the right part's (in characters), each descending.
func spmMerges(tokens []string, scores []float32, vocab map[string]int) [][2]string {
	type merge struct {
		l, r   string
		score  float32
		nl, nr int
	}
	var all []merge
	for id, tok := range tokens {
		start := len(all)
		for i := range tok {
			if i == 0 {
				continue
			}
			l, r := tok[:i], tok[i:]
			if _, ok := vocab[l]; !ok {
				continue
			}
			if _, ok := vocab[r]; !ok {
				continue
			}
			all = append(all, merge{l, r, scores[id], utf8.RuneCountInString(l), utf8.RuneCountInString(r)})
		}
		local := all[start:]
		sort.SliceStable(local, func(i, j int) bool {
			if a, b := vocab[local[i].l], vocab[local[j].l]; a != b {
				return a < b
			}
			return vocab[local[i].r] < vocab[local[j].r]
		})
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.score != b.score {
			return a.score > b.score
		}
		if a.nl != b.nl {
			return a.nl > b.nl
		}
		return a.nr > b.nr
	})
	out := make([][2]string, len(all))
	for i, m := range all {
		out[i] = [2]string{m.l, m.r}
	}
	return out
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
	seq := func(s string, typeID int) map[string]any {
		return map[string]any{"Sequence": map[string]any{"id": s, "type_id": typeID}}
	}
	tok := func(typeID int) map[string]any {
		return map[string]any{"SpecialToken": map[string]any{"id": bos, "type_id": typeID}}
	}
	return map[string]any{"type": "TemplateProcessing",
		"single":         []any{tok(0), seq("A", 0)},
		"pair":           []any{tok(0), seq("A", 0), tok(1), seq("B", 1)},
		"special_tokens": map[string]any{bos: map[string]any{"id": bos, "ids": []int{id}, "tokens": []string{bos}}}}
}
