package gguf

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/posttrain/posttrain/models/decoder"
)

// spmPipeline is the normalizer and pre-tokenizer of a SentencePiece-style tokenizer.json with
// add_space_prefix false (Gemma's, as transformers' GemmaConverter writes it and the importer's
// sentencePiece rebuilds it): Replace(" ", "▁") and Split(" ", MergedWithPrevious).
const spmPipeline = `{"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"},` +
	`"pre_tokenizer":{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false}}`

var byteToken = regexp.MustCompile(`^<0x[0-9A-F]{2}>$`)

// isSPMStyle reports whether tokenizer.json is a SentencePiece-style BPE with byte fallback in
// Gemma's pipeline (spmPipeline).
func isSPMStyle(tj *hfTokenizerJSON) bool {
	if tj.Model.Type != "BPE" || !tj.Model.ByteFallback {
		return false
	}
	var got, want any
	pair, _ := json.Marshal(map[string]json.RawMessage{"normalizer": tj.Normalizer, "pre_tokenizer": tj.PreTokenizer})
	if json.Unmarshal(pair, &got) != nil || json.Unmarshal([]byte(spmPipeline), &want) != nil {
		return false
	}
	return reflect.DeepEqual(got, want)
}

// spmVocab is the tokenizer.ggml.* vocabulary of a SentencePiece-style tokenizer
// (tokenizer.ggml.model "llama", as _set_vocab_sentencepiece writes Gemma 3's from its
// tokenizer.model), rebuilt from tokenizer.json, which has no scores: tokens by id (ids up to the
// largest below vocab_size; added tokens at or past it are dropped, as _create_vocab_sentencepiece
// drops them, and absent ids are "[PAD<i>]", UNUSED); types: "<0xNN>" BYTE with score 0, added
// tokens CONTROL (special or looking special) or USER_DEFINED ("▁" as " ") with score −1000, the
// rest NORMAL with score −(id − the first NORMAL id). A SentencePiece BPE merges the adjacent pair
// whose merged piece scores highest, so only the order of the multi-character pieces' scores
// matters; Gemma 3's tokenizer.model scores them so (−(id − 494) for every one of them; only
// single characters, which no merge makes, are scored otherwise), and the importer's spmMerges
// rebuilds tokenizer.json's merges from these scores in order (TestExport_SentencePieceTokenizer).
func spmVocab(tj *hfTokenizerJSON, vocabSize int) (tokens, types, scores []any, err error) {
	byID := map[int]string{}
	for s, id := range tj.Model.Vocab {
		if id < 0 || id >= vocabSize {
			return nil, nil, nil, fmt.Errorf("token id %d is outside the model's vocab_size %d", id, vocabSize)
		}
		byID[id] = s
	}
	added, special := map[int]bool{}, map[int]bool{}
	for _, a := range tj.AddedTokens {
		if a.ID >= vocabSize {
			continue
		}
		byID[a.ID], added[a.ID] = a.Content, true
		special[a.ID] = a.Special || looksSpecial(a.Content)
	}
	n := 0
	for id := range byID {
		n = max(n, id+1)
	}
	firstNormal := -1
	for id := range n {
		if tok, ok := byID[id]; ok && !added[id] && !byteToken.MatchString(tok) {
			firstNormal = id
			break
		}
	}
	tokens, types, scores = make([]any, n), make([]any, n), make([]any, n)
	for id := range n {
		tok, ok := byID[id]
		switch {
		case !ok:
			tokens[id], types[id], scores[id] = fmt.Sprintf("[PAD%d]", id), int32(5), float32(-1000) // UNUSED
		case special[id]:
			tokens[id], types[id], scores[id] = tok, int32(tokenControl), float32(-1000)
		case added[id]:
			tokens[id], types[id], scores[id] = strings.ReplaceAll(tok, "▁", " "), int32(tokenUserDefined), float32(-1000)
		case byteToken.MatchString(tok):
			tokens[id], types[id], scores[id] = tok, int32(6), float32(0) // BYTE
		default:
			tokens[id], types[id], scores[id] = tok, int32(tokenNormal), float32(-(id - firstNormal))
		}
	}
	return tokens, types, scores, nil
}

// spmTokenizer is readExportTokenizer's SentencePiece-style case (Gemma 3 only: llama.cpp's
// gemma3 writes add_space_prefix false; Llama 2's true is not supported by the importer either).
func spmTokenizer(tj *hfTokenizerJSON, tc map[string]any, cfg *decoder.Config, arch string) (*exportTokenizer, error) {
	if arch != "gemma3" {
		return nil, fmt.Errorf("a SentencePiece-style tokenizer can be exported for gemma3 only, not %s", arch)
	}
	tokens, types, scores, err := spmVocab(tj, cfg.VocabSize)
	if err != nil {
		return nil, err
	}
	out := &exportTokenizer{n: len(tokens), kvs: []KV{
		{"tokenizer.ggml.model", TypeString, "llama"}, {"tokenizer.ggml.pre", TypeString, "default"},
		{"tokenizer.ggml.tokens", TypeArray, Array{TypeString, tokens}},
		{"tokenizer.ggml.scores", TypeArray, Array{TypeFloat32, scores}},
		{"tokenizer.ggml.token_type", TypeArray, Array{TypeInt32, types}},
	}}
	if err := out.specials(tj, tc, cfg); err != nil {
		return nil, err
	}
	out.kvs = append(out.kvs, KV{"tokenizer.ggml.add_space_prefix", TypeBool, false})
	return out, nil
}
