package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// buildModel checks tokenizer.json's "model" and builds the vocabulary and merge table; byteLevel
// says whether the pre-tokenizer maps words to the ByteLevel alphabet.
func buildModel(tj *tokenizerJSON, byteLevel bool) (*model, error) {
	mj := &tj.Model
	switch {
	case mj.Type != "BPE":
		return nil, fmt.Errorf("model.type: %q is not supported (only BPE)", mj.Type)
	case mj.Dropout != nil && *mj.Dropout != 0:
		return nil, fmt.Errorf("model.dropout: must be null, got %v", *mj.Dropout)
	case mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("model.continuing_subword_prefix: must be empty")
	case mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "":
		return nil, fmt.Errorf("model.end_of_word_suffix: must be empty")
	case mj.ByteFallback && byteLevel:
		return nil, fmt.Errorf("model.byte_fallback: must be false for a ByteLevel tokenizer")
	case len(mj.Vocab) == 0:
		return nil, fmt.Errorf("model.vocab: missing or empty")
	}
	m := &model{vocab: mj.Vocab, byteLevel: byteLevel, byteFallback: mj.ByteFallback, fuseUnk: mj.FuseUnk,
		unk: -1, ignoreMerges: mj.IgnoreMerges, cache: newWordCache()}
	for tok, id := range mj.Vocab {
		if id < 0 || id > 1<<24 {
			return nil, fmt.Errorf("model.vocab: token %q has id %d out of range", tok, id)
		}
		if id >= len(m.tokens) {
			m.tokens = append(m.tokens, make([]string, id+1-len(m.tokens))...)
		}
		if m.tokens[id] != "" {
			return nil, fmt.Errorf("model.vocab: id %d is given to both %q and %q", id, m.tokens[id], tok)
		}
		m.tokens[id] = tok
	}
	if byteLevel {
		if mj.UnkToken != nil {
			return nil, fmt.Errorf("model.unk_token: must be null for a ByteLevel tokenizer")
		}
		// A byte without a token is dropped from the text, as HuggingFace's BPE::merge_word drops
		// a symbol missing from the vocabulary when there is no unk_token (SmolLM2's vocabulary
		// has no token for 21 bytes: 0x04, 0x06, 0x13, ..., 0xC0, 0xC1, 0xF1, 0xF2, 0xF5-0xFF).
		for b := range 256 {
			m.byteIDs[b] = -1
			if id, ok := mj.Vocab[string(byteToRune[b])]; ok {
				m.byteIDs[b] = int32(id)
			}
		}
	} else {
		for b := range 256 {
			m.byteIDs[b] = -1
			if id, ok := mj.Vocab[fmt.Sprintf("<0x%02X>", b)]; ok && mj.ByteFallback {
				m.byteIDs[b] = int32(id)
			}
		}
		for c := range 128 {
			m.asciiIDs[c] = -1
			if id, ok := mj.Vocab[string(rune(c))]; ok {
				m.asciiIDs[c] = int32(id)
			}
		}
		if mj.UnkToken != nil {
			id, ok := mj.Vocab[*mj.UnkToken]
			if !ok {
				return nil, fmt.Errorf("model.unk_token: %q is not in model.vocab", *mj.UnkToken)
			}
			m.unk = int32(id)
		}
	}
	pairs, err := parseMerges(mj.Merges)
	if err != nil {
		return nil, err
	}
	m.merges = make(map[uint64]merge, len(pairs))
	for rank, p := range pairs {
		left, okL := mj.Vocab[p[0]]
		right, okR := mj.Vocab[p[1]]
		id, okM := mj.Vocab[p[0]+p[1]]
		if !okL || !okR || !okM {
			return nil, fmt.Errorf("model.merges[%d]: %q, %q or their merge %q is not in model.vocab", rank, p[0], p[1], p[0]+p[1])
		}
		// A repeated pair keeps its last rank, as HuggingFace's HashMap collect does.
		m.merges[pairKey(int32(left), int32(right))] = merge{rank: int32(rank), id: int32(id)}
	}
	return m, nil
}

// parseMerges reads "merges" in either format: ["a b", ...] (older files) or [["a", "b"], ...].
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		trimmed = bytes.TrimSpace(trimmed[1:])
	}
	if len(trimmed) == 0 || trimmed[0] != '"' {
		var pairs [][2]string
		if err := json.Unmarshal(raw, &pairs); err != nil {
			return nil, fmt.Errorf("model.merges: want [\"a b\", ...] or [[\"a\", \"b\"], ...]: %w", err)
		}
		return pairs, nil
	}
	var lines []string
	if err := json.Unmarshal(raw, &lines); err != nil {
		return nil, fmt.Errorf("model.merges: %w", err)
	}
	pairs := make([][2]string, len(lines))
	for i, l := range lines {
		a, b, ok := strings.Cut(l, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, fmt.Errorf("model.merges[%d]: %q is not two tokens separated by one space", i, l)
		}
		pairs[i] = [2]string{a, b}
	}
	return pairs, nil
}

// setAddedTokens installs tokenizer.json's added_tokens. Their ids must be those HuggingFace
// assigns when it loads the file: the model's id for a token already in the vocabulary, else the
// next id after the vocabulary and the previous added tokens (HF only warns on a mismatch).
func (t *BPE) setAddedTokens(tokens []AddedToken) error {
	t.added = nil
	t.addedByID = make(map[int]int)
	t.addedByContent = make(map[string]int)
	t.special = make(map[int]bool)
	t.addedSpelling = make(map[int]string)
	next := len(t.model.vocab)
	var raw, normalized []AddedToken
	for i, a := range tokens {
		if a.Content == "" {
			return fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		if _, dup := t.addedByContent[a.Content]; dup {
			return fmt.Errorf("added_tokens[%d]: %q is listed twice", i, a.Content)
		}
		want, inVocab := t.model.vocab[a.Content]
		if !inVocab {
			want = next
		}
		if a.ID != want {
			return fmt.Errorf("added_tokens[%d]: %q has id %d but HuggingFace would give it %d", i, a.Content, a.ID, want)
		}
		if _, dup := t.addedByID[a.ID]; dup {
			return fmt.Errorf("added_tokens[%d]: id %d is listed twice", i, a.ID)
		}
		next = max(next, a.ID+1)
		t.addedByID[a.ID] = len(t.added)
		t.addedByContent[a.Content] = len(t.added)
		t.added = append(t.added, a)
		if a.Normalized {
			a.Content = t.normalize(a.Content) // matched against normalized text
			normalized = append(normalized, a)
			if a.Content != t.added[len(t.added)-1].Content {
				t.addedSpelling[a.ID] = a.Content
			}
		} else {
			raw = append(raw, a)
		}
	}
	// HuggingFace decides "special" by content, so a model token spelled like a special token is
	// skipped too.
	for _, a := range t.added {
		if a.Special {
			t.special[a.ID] = true
			if id, ok := t.model.vocab[a.Content]; ok {
				t.special[id] = true
			}
		}
	}
	t.raw, t.norm = newAddedMatcher(raw), newAddedMatcher(normalized)
	t.vocabSize = len(t.model.vocab)
	for _, a := range t.added {
		if _, ok := t.model.vocab[a.Content]; !ok {
			t.vocabSize++
		}
	}
	return nil
}

// WithoutAddedTokens returns a copy of t without the added tokens of the given ids; it shares the
// vocabulary, merges and cache with t. Qwen2.5's tokenizer is Qwen3's without 151665-151668.
func (t *BPE) WithoutAddedTokens(ids ...int) (*BPE, error) {
	drop := make(map[int]bool)
	for _, id := range ids {
		if _, ok := t.addedByID[id]; !ok {
			return nil, fmt.Errorf("tokenizer: id %d is not an added token", id)
		}
		drop[id] = true
	}
	var keep []AddedToken
	for _, a := range t.added {
		if !drop[a.ID] {
			keep = append(keep, a)
		}
	}
	c := *t
	if err := c.setAddedTokens(keep); err != nil {
		return nil, err
	}
	return &c, nil
}
