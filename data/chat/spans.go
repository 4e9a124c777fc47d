package chat

import (
	"fmt"
	"slices"
	"strings"
)

// Span is the half-open byte range [Start, End) of a rendered conversation that message Message
// (an assistant turn) produced: its content and the closing end-of-turn token, not the newline the
// template writes after it (the model stops at the end-of-turn token and never generates that).
type Span struct {
	Message    int
	Start, End int
}

// EndOfTurn is the token that closes an assistant turn: "<|im_end|>" for ChatML templates (Qwen),
// else "<|eot_id|>" for Llama 3, else the eos_token.
func (t *Template) EndOfTurn() string {
	for _, tok := range []string{"<|im_end|>", "<|eot_id|>"} {
		if strings.Contains(t.Source, tok) {
			return tok
		}
	}
	return t.Special["eos_token"]
}

// AssistantSpans renders msgs and returns the text with the byte span of every assistant turn,
// for completion-only SFT loss, without {% generation %} tags: turn i starts where the rendering of
// msgs[:i] with add_generation_prompt=true ends (which must be a prefix of the full rendering),
// and ends after the first end-of-turn token that follows. opt.AddGenerationPrompt applies to the
// full rendering only.
func (t *Template) AssistantSpans(msgs []Message, opt Options) (string, []Span, error) {
	full, err := t.Render(msgs, opt)
	if err != nil {
		return "", nil, err
	}
	eot := t.EndOfTurn()
	if eot == "" {
		return "", nil, fmt.Errorf("assistant spans: template has no end-of-turn token (no <|im_end|>, <|eot_id|> or eos_token)")
	}
	var spans []Span
	for i, m := range msgs {
		if m.Role != "assistant" {
			continue
		}
		if strings.Contains(m.Content, eot) {
			return "", nil, fmt.Errorf("assistant spans: message %d contains the end-of-turn token %s in its content", i, eot)
		}
		popt := opt
		popt.AddGenerationPrompt = true
		prefix, err := t.Render(msgs[:i], popt)
		if err != nil {
			return "", nil, fmt.Errorf("assistant spans: render messages[:%d]: %w", i, err)
		}
		if !strings.HasPrefix(full, prefix) {
			return "", nil, fmt.Errorf("assistant spans: the template renders messages before message %d differently once it follows (prefix not stable)", i)
		}
		end := strings.Index(full[len(prefix):], eot)
		if end < 0 {
			return "", nil, fmt.Errorf("assistant spans: no %s after assistant message %d", eot, i)
		}
		spans = append(spans, Span{Message: i, Start: len(prefix), End: len(prefix) + end + len(eot)})
	}
	return full, spans, nil
}

// PromptCompletion renders a conversational prompt-completion pair as TRL does
// (maybe_apply_chat_template): prompt = render(prompt, add_generation_prompt=true), completion =
// render(prompt+completion)[len(prompt):]. With Qwen the completion ends "<|im_end|>\n": it already
// holds the end-of-turn token, so a trainer must not append EOS again (TRL #4481).
func (t *Template) PromptCompletion(prompt, completion []Message, opt Options) (string, string, error) {
	popt := opt
	popt.AddGenerationPrompt = true
	p, err := t.Render(prompt, popt)
	if err != nil {
		return "", "", err
	}
	fopt := opt
	fopt.AddGenerationPrompt = false
	full, err := t.Render(slices.Concat(prompt, completion), fopt)
	if err != nil {
		return "", "", err
	}
	if !strings.HasPrefix(full, p) {
		return "", "", fmt.Errorf("prompt-completion: the rendered prompt is not a prefix of the rendered conversation (template not prefix-stable)")
	}
	return p, full[len(p):], nil
}

// Encoder turns text into token ids (data/tokenizer's BPE satisfies it).
type Encoder interface {
	Encode(text string) []int
}

// TokenMask encodes text and marks the tokens inside spans. Each span boundary must fall on a
// token boundary of the whole text's encoding: the text is encoded piecewise at the boundaries and
// the pieces must concatenate to enc.Encode(text), else an error names the boundary.
func TokenMask(enc Encoder, text string, spans []Span) (ids []int, mask []bool, err error) {
	pos := 0
	for _, s := range spans {
		if s.Start < pos || s.End < s.Start || s.End > len(text) {
			return nil, nil, fmt.Errorf("token mask: span [%d,%d) out of order or outside the text", s.Start, s.End)
		}
		for _, seg := range []struct {
			end  int
			keep bool
		}{{s.Start, false}, {s.End, true}} {
			piece := enc.Encode(text[pos:seg.end])
			ids = append(ids, piece...)
			for range piece {
				mask = append(mask, seg.keep)
			}
			pos = seg.end
		}
	}
	tail := enc.Encode(text[pos:])
	ids = append(ids, tail...)
	mask = append(mask, make([]bool, len(tail))...)
	if whole := enc.Encode(text); !slices.Equal(whole, ids) {
		n := 0
		for n < len(whole) && n < len(ids) && whole[n] == ids[n] {
			n++
		}
		return nil, nil, fmt.Errorf("token mask: an assistant span boundary splits a token (encodings differ from token %d)", n)
	}
	return ids, mask, nil
}

// Tokenized is a conversation rendered and encoded for training.
type Tokenized struct {
	Text  string
	Spans []Span
	IDs   []int
	Mask  []bool // true on assistant tokens (content + end-of-turn)
}

// Tokenize renders msgs, finds the assistant spans, encodes the text and rejects doubled special
// tokens: one call for completion-only SFT.
func (t *Template) Tokenize(enc Encoder, msgs []Message, opt Options) (*Tokenized, error) {
	text, spans, err := t.AssistantSpans(msgs, opt)
	if err != nil {
		return nil, err
	}
	if err := CheckDoubledText(text, t.SpecialStrings()); err != nil {
		return nil, err
	}
	ids, mask, err := TokenMask(enc, text, spans)
	if err != nil {
		return nil, err
	}
	return &Tokenized{Text: text, Spans: spans, IDs: ids, Mask: mask}, nil
}

// SpecialStrings returns the template's special tokens: the set ones of bos/eos/pad/unk and the
// end-of-turn token, without duplicates.
func (t *Template) SpecialStrings() []string {
	var out []string
	for _, s := range []string{t.Special["bos_token"], t.Special["eos_token"], t.Special["pad_token"],
		t.Special["unk_token"], t.EndOfTurn()} {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
