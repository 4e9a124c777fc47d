package chat

import (
	"fmt"
	"strings"
)

// Doubled special tokens are a silent training bug: TRL #4481 (DPO on Qwen2.5 appended EOS to a
// completion that already ended "<|im_end|>\n", giving "<|im_end|>\n<|im_end|>") and TRL #1591 (BOS
// added by both the template and the tokenizer). These checks turn them into errors.

// DoubledError reports a special token that occurs twice with only whitespace between.
type DoubledError struct {
	Token       string
	First, Next int // byte offsets (text check) or token positions (id check)
	Unit        string
}

func (e *DoubledError) Error() string {
	return fmt.Sprintf("doubled special token %s at %s %d and %d (only whitespace between): the chat template already adds it, so do not add BOS/EOS again (TRL #4481, #1591)",
		e.Token, e.Unit, e.First, e.Next)
}

// CheckDoubledText returns a *DoubledError if any of specials occurs twice in text separated only
// by whitespace, e.g. "<|im_end|><|im_end|>" or "<|im_end|>\n<|im_end|>".
func CheckDoubledText(text string, specials []string) error {
	for _, tok := range specials {
		if tok == "" {
			continue
		}
		prev := -1
		for off := 0; ; {
			i := strings.Index(text[off:], tok)
			if i < 0 {
				break
			}
			i += off
			if prev >= 0 && strings.TrimFunc(text[prev+len(tok):i], isPySpace) == "" {
				return &DoubledError{Token: tok, First: prev, Next: i, Unit: "bytes"}
			}
			prev, off = i, i+len(tok)
		}
	}
	return nil
}

// CheckDoubledIDs returns a *DoubledError if a special token id (a key of special, valued by its
// text) occurs twice in ids with only blank tokens between; blank (may be nil) tells which ids
// decode to whitespace only, such as Qwen's "\n" (198).
func CheckDoubledIDs(ids []int, special map[int]string, blank func(id int) bool) error {
	last := map[int]int{} // special id → position of its latest occurrence
	lastNonBlank := -1
	for pos, id := range ids {
		if tok, ok := special[id]; ok {
			if p, seen := last[id]; seen && lastNonBlank == p {
				return &DoubledError{Token: tok, First: p, Next: pos, Unit: "token positions"}
			}
			last[id] = pos
		}
		if blank == nil || !blank(id) {
			lastNonBlank = pos
		}
	}
	return nil
}

// Vocab maps a token's text to its id (data/tokenizer's BPE satisfies it).
type Vocab interface {
	TokenToID(token string) (int, bool)
}

// SpecialIDs returns id → text for the tokens of specials that vocab knows.
func SpecialIDs(vocab Vocab, specials []string) map[int]string {
	out := map[int]string{}
	for _, s := range specials {
		if id, ok := vocab.TokenToID(s); ok {
			out[id] = s
		}
	}
	return out
}
