//go:build hftokenizers

package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"

	hf "github.com/daulet/tokenizers"
)

// HF is the Tokenizer interface backed by HuggingFace's Rust `tokenizers` library through
// github.com/daulet/tokenizers (build tag hftokenizers; linking needs its libtokenizers.a: `make
// hftokenizers` builds it into bin/hftokenizers, then CGO_LDFLAGS=-L$PWD/bin/hftokenizers). Encode, EncodePlain and Decode run in Rust; the vocabulary
// lookups, which that binding does not expose, come from the pure-Go tables of the same file.
type HF struct {
	withAdded *hf.Tokenizer // the file as is (its truncation and padding off)
	plain     *hf.Tokenizer // the file with "added_tokens" emptied: no added token is matched
	lookup    *BPE
}

var _ Tokenizer = (*HF)(nil)

// LoadHF loads path (as Load does) into HuggingFace's Rust library. Close releases it.
func LoadHF(path string) (*HF, error) {
	lookup, err := Load(path)
	if err != nil {
		return nil, err
	}
	file, _, err := resolve(path)
	if err != nil {
		return nil, err
	}
	data, err := readMaybeGzip(file)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	return newHF(data, file, lookup)
}

// NewHF builds an HF tokenizer from the contents of a tokenizer.json; name prefixes errors.
func NewHF(data []byte, name string) (*HF, error) {
	lookup, err := FromJSON(data, name)
	if err != nil {
		return nil, err
	}
	return newHF(data, name, lookup)
}

func newHF(data []byte, name string, lookup *BPE) (*HF, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	// Rust would apply the file's truncation and padding to every encode; transformers does not
	// (FromJSON), so neither does this.
	doc["truncation"], doc["padding"] = json.RawMessage("null"), json.RawMessage("null")
	asIs, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	doc["added_tokens"] = json.RawMessage("[]")
	plainJSON, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	withAdded, err := hf.FromBytes(asIs)
	if err != nil {
		return nil, fmt.Errorf("%s: rust tokenizers: %w", name, err)
	}
	plain, err := hf.FromBytes(plainJSON)
	if err != nil {
		withAdded.Close()
		return nil, fmt.Errorf("%s: rust tokenizers (no added tokens): %w", name, err)
	}
	return &HF{withAdded: withAdded, plain: plain, lookup: lookup}, nil
}

// Close releases the Rust tokenizers.
func (t *HF) Close() error {
	t.withAdded.Close()
	return t.plain.Close()
}

// Encode implements Tokenizer. The binding passes text as a C string: a NUL byte ends it.
func (t *HF) Encode(text string) []int {
	ids, _ := t.withAdded.Encode(text, false)
	return toInts(ids)
}

// EncodeSpecial is Encode with the special tokens the file's post-processor adds (HuggingFace's
// encode with add_special_tokens=True), as BPE.EncodeSpecial. Rust runs the tokenizer.json's
// post-processor as it is: transformers' rebuild from tokenizer_config.json's add_bos_token /
// add_eos_token (Llama and Gemma tokenizer classes) is not applied.
func (t *HF) EncodeSpecial(text string) []int {
	ids, _ := t.withAdded.Encode(text, true)
	return toInts(ids)
}

// EncodePlain implements Tokenizer.
func (t *HF) EncodePlain(text string) []int {
	ids, _ := t.plain.Encode(text, false)
	return toInts(ids)
}

// Decode implements Tokenizer. The binding returns a C string: output stops at a NUL byte.
func (t *HF) Decode(ids []int, skipSpecial bool) string {
	u := make([]uint32, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id <= math.MaxUint32 { // out of range: unknown, dropped as HuggingFace does
			u = append(u, uint32(id))
		}
	}
	return t.withAdded.Decode(u, skipSpecial)
}

// TokenToID implements Tokenizer (pure-Go tables).
func (t *HF) TokenToID(token string) (int, bool) { return t.lookup.TokenToID(token) }

// IDToToken implements Tokenizer (pure-Go tables).
func (t *HF) IDToToken(id int) (string, bool) { return t.lookup.IDToToken(id) }

// VocabSize implements Tokenizer (Rust's get_vocab_size(true)).
func (t *HF) VocabSize() int { return int(t.withAdded.VocabSize()) }

// SpecialIDs implements Tokenizer (pure-Go tables).
func (t *HF) SpecialIDs() []int { return t.lookup.SpecialIDs() }

// Config returns the tokenizer_config.json read by LoadHF.
func (t *HF) Config() Config { return t.lookup.Config() }

func toInts(ids []uint32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}
