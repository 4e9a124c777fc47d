// Package tokenizer encodes text to token ids and back exactly as HuggingFace `tokenizers` does
// for the BPE tokenizers of Qwen2/2.5/3, Llama 3.x, SmolLM2 and Gemma 3, in pure Go.
//
// Encode runs HuggingFace's pipeline as the tokenizer.json describes it (pipeline.go): added
// tokens (such as <|im_end|>) are cut out of the raw text; each remaining piece is normalized (NFC,
// or Gemma's " " → "▁"), split by the pre-tokenizer (Qwen's, Llama 3's or GPT-2's regex, Digits,
// a String Split), and merged by BPE rank, over the ByteLevel alphabet or, for Gemma, over
// characters with <0xNN> byte fallback. EncodeSpecial adds what the post-processor adds (the BOS
// of Llama 3 and Gemma 3). Decode runs the file's decoder (ByteLevel, or Replace/ByteFallback/
// Fuse) and replaces ill-formed UTF-8 as Rust's String::from_utf8_lossy does. testdata/golden.json
// holds the ids HuggingFace gives on 415 strings for Qwen3, testdata/<family>/golden.json.gz 480
// strings and a fuzz set for Llama 3.1 and Gemma 3 (HF tokenizers 0.22.2 and transformers
// 4.57.6's AutoTokenizer, scripts/reference/tokenizer_goldens.py); the tests require equality on
// every one.
//
// Build with -tags hftokenizers for NewHF, the same interface backed by HuggingFace's Rust
// library through github.com/daulet/tokenizers (needs libtokenizers.a at link time: make
// hftokenizers builds it, docs/tokenizers.md).
package tokenizer

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// Tokenizer turns text into token ids and back. *BPE implements it; so does *HF under the
// hftokenizers build tag.
type Tokenizer interface {
	// Encode returns the ids of text with added tokens (<|im_start|>, <think>, ...) matched in
	// it: HuggingFace's tokenizer.encode(text, add_special_tokens=False).ids.
	Encode(text string) []int
	// EncodePlain returns the ids of text with no added token matched: "<|im_end|>" becomes the
	// BPE tokens of its characters. Use it for untrusted text that must not inject control tokens.
	EncodePlain(text string) []int
	// Decode returns the text of ids; skipSpecial drops added tokens marked special. Unknown ids
	// are dropped, as HuggingFace does.
	Decode(ids []int, skipSpecial bool) string
	// TokenToID returns the id of a token in its vocabulary spelling ("Ġhello", "<|im_end|>").
	TokenToID(token string) (int, bool)
	// IDToToken returns the vocabulary spelling of id.
	IDToToken(id int) (string, bool)
	// VocabSize is the number of distinct tokens, model vocabulary plus added tokens
	// (HuggingFace's get_vocab_size(with_added_tokens=True)). Qwen3: 151669. The model's
	// embedding matrix may be larger (151936).
	VocabSize() int
	// SpecialIDs returns the ids of the special added tokens, ascending.
	SpecialIDs() []int
}

var _ Tokenizer = (*BPE)(nil)

// BPE is a byte-level BPE tokenizer loaded from a tokenizer.json. It is safe for concurrent use.
type BPE struct {
	model          *model
	added          []AddedToken   // in tokenizer.json order
	addedByID      map[int]int    // id → index into added
	addedByContent map[string]int // content → index into added
	// addedSpelling is the normalized content of the normalized added tokens the normalizer
	// changes: HuggingFace's id → token map (IDToToken, Decode) holds that spelling.
	addedSpelling map[int]string
	raw           *addedMatcher // added tokens with normalized=false, matched in the raw text
	norm          *addedMatcher // added tokens with normalized=true, matched in the NFC text
	normalizers   []normalizer  // the normalizer, in order (none: nil)
	nfcOnly       bool          // the normalizer is NFC alone (the fast path)
	pre           *preTokenizer
	decoder       []decStep // the decoder chain
	// byteLevelDecoder: the decoder is ByteLevel alone (Decode's fast path).
	byteLevelDecoder bool
	// prefix and suffix are the special tokens the post-processor (or tokenizer_config.json's
	// add_bos_token / add_eos_token) puts around a sequence: EncodeSpecial.
	prefix, suffix []int
	special        map[int]bool // ids whose token is special (Decode(ids, true) drops them)
	vocabSize      int
	config         Config
}

// Config returns the tokenizer_config.json found next to the tokenizer.json (zero if none).
func (t *BPE) Config() Config { return t.config }

// AddedTokens returns the added tokens in tokenizer.json order.
func (t *BPE) AddedTokens() []AddedToken { return append([]AddedToken(nil), t.added...) }

// Encode implements Tokenizer.
func (t *BPE) Encode(text string) []int { return t.encode(text, true) }

// EncodePlain implements Tokenizer.
func (t *BPE) EncodePlain(text string) []int { return t.encode(text, false) }

func (t *BPE) encode(text string, withAdded bool) []int {
	if !utf8.ValidString(text) {
		text = lossyString([]byte(text)) // HuggingFace only accepts valid UTF-8
	}
	ids := make([]int, 0, len(text)/3+1)
	if !withAdded {
		return t.encodeText(t.normalize(text), ids)
	}
	var raw, normed []segment
	for _, seg := range t.raw.split(text, raw) {
		if seg.id >= 0 {
			ids = append(ids, seg.id)
			continue
		}
		normed = t.norm.split(t.normalize(seg.text), normed[:0])
		for _, s := range normed {
			if s.id >= 0 {
				ids = append(ids, s.id)
			} else {
				ids = t.encodeText(s.text, ids)
			}
		}
	}
	return ids
}

// EncodeSpecial returns the ids of text with added tokens matched and the special tokens the
// post-processor adds around it: HuggingFace's tokenizer.encode(text, add_special_tokens=True)
// (Llama 3 and Gemma 3 prepend their BOS; Qwen adds nothing). Do not use it on a rendered chat
// template that writes bos_token itself: the BOS would be doubled.
func (t *BPE) EncodeSpecial(text string) []int {
	body := t.Encode(text)
	ids := make([]int, 0, len(t.prefix)+len(body)+len(t.suffix)) // never nil: "" gives [], as HF does
	ids = append(ids, t.prefix...)
	ids = append(ids, body...)
	return append(ids, t.suffix...)
}

// SpecialPrefix returns the ids EncodeSpecial puts before the text (the BOS of Llama 3 and Gemma
// 3; none for Qwen).
func (t *BPE) SpecialPrefix() []int { return append([]int(nil), t.prefix...) }

// SpecialSuffix returns the ids EncodeSpecial puts after the text.
func (t *BPE) SpecialSuffix() []int { return append([]int(nil), t.suffix...) }

func (t *BPE) normalize(s string) string {
	if t.nfcOnly {
		return nfc(s)
	}
	for _, n := range t.normalizers {
		s = n(s)
	}
	return s
}

// encodeText pre-tokenizes normalized text and appends the BPE ids of each word.
func (t *BPE) encodeText(s string, ids []int) []int {
	t.pre.run(s, func(word string) { ids = t.model.encodeWord(word, ids) })
	return ids
}

// Decode implements Tokenizer.
func (t *BPE) Decode(ids []int, skipSpecial bool) string {
	if !t.byteLevelDecoder {
		toks := make([]string, 0, len(ids))
		for _, id := range ids {
			if skipSpecial && t.special[id] {
				continue
			}
			if tok, ok := t.IDToToken(id); ok {
				toks = append(toks, tok)
			}
		}
		for _, step := range t.decoder {
			toks = step(toks)
		}
		return strings.Join(toks, "")
	}
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if skipSpecial && t.special[id] {
			continue
		}
		if tok, ok := t.IDToToken(id); ok {
			buf = appendTokenBytes(buf, tok)
		}
	}
	return lossyString(buf)
}

// DecodeText returns the text of ids as transformers' tokenizer.decode(ids, skip_special_tokens)
// does (what TRL hands reward functions): Decode, then, when tokenizer_config.json sets
// clean_up_tokenization_spaces (Llama 3), transformers' clean_up_tokenization, which removes the
// space before . ? ! , and the contractions n't 'm 's 've 're, and turns " ' " into "'".
func (t *BPE) DecodeText(ids []int, skipSpecial bool) string {
	s := t.Decode(ids, skipSpecial)
	if !t.config.CleanUpTokenizationSpaces {
		return s
	}
	return cleanUpTokenization(s)
}

// cleanUpTokenization is transformers' PreTrainedTokenizerBase.clean_up_tokenization: the same
// replacements, in the same order.
func cleanUpTokenization(s string) string {
	for _, r := range [][2]string{{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
		{" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

// TokenToID implements Tokenizer; added tokens take precedence, as in HuggingFace.
func (t *BPE) TokenToID(token string) (int, bool) {
	if i, ok := t.addedByContent[token]; ok {
		return t.added[i].ID, true
	}
	id, ok := t.model.vocab[token]
	return id, ok
}

// IDToToken implements Tokenizer.
func (t *BPE) IDToToken(id int) (string, bool) {
	if i, ok := t.addedByID[id]; ok {
		if s, ok := t.addedSpelling[id]; ok {
			return s, true
		}
		return t.added[i].Content, true
	}
	if id < 0 || id >= len(t.model.tokens) || t.model.tokens[id] == "" {
		return "", false
	}
	return t.model.tokens[id], true
}

// VocabSize implements Tokenizer.
func (t *BPE) VocabSize() int { return t.vocabSize }

// SpecialIDs implements Tokenizer.
func (t *BPE) SpecialIDs() []int {
	var ids []int
	for _, a := range t.added {
		if a.Special {
			ids = append(ids, a.ID)
		}
	}
	sort.Ints(ids)
	return ids
}
