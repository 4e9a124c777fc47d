package encode

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/data/chat"
)

// Encoded is a prompt followed by a completion, as token ids; the completion starts at Start.
type Encoded struct {
	IDs   []int32
	Start int
}

// Completion returns the completion's length in tokens.
func (e Encoded) Completion() int { return len(e.IDs) - e.Start }

// Truncation modes, TRL's truncation_mode values.
const (
	KeepEnd   = "keep_end"
	KeepStart = "keep_start"
)

// Lengths are TRL's truncation limits of the preference trainers: max_prompt_length,
// max_completion_length and max_length (0 = no limit) and truncation_mode ("" = keep_end). What
// they mean is each trainer's rule (trainers/dpo, trainers/kto); EncodePair only names them in
// its errors.
type Lengths struct {
	MaxPrompt, MaxCompletion, Max int
	Mode                          string
}

func (l Lengths) String() string {
	mode := l.Mode
	if mode == "" {
		mode = KeepEnd
	}
	return fmt.Sprintf("max_prompt_length %d, max_completion_length %d, max_length %d, truncation_mode %s",
		l.MaxPrompt, l.MaxCompletion, l.Max, mode)
}

// Truncation is a trainer's rule for cutting one tokenized prompt/completion pair to its limits:
// TRL's DPOTrainer and KTOTrainer cut differently, and trainers/dpo and trainers/kto hold their
// rules.
type Truncation struct {
	Lengths Lengths // the limits, named in errors
	// Cut returns the prompt's and the completion's ids cut to the limits; a completion returned
	// empty was cut away entirely. bos is the tokenizer's BOS id (BOS, -1 if none) and eos the id
	// of the EOS the completion is to end with (-1: none, data that gets no EOS). nil: no cut.
	Cut func(prompt, completion []int, bos, eos int) (p, c []int)
	// EOSAfterCut leaves the EOS to Cut, which gets the completion's ids without it (KTO's
	// _process_tokens appends it after the cut); otherwise the EOS text is appended to the
	// completion before tokenizing (DPO's tokenize_row), so Cut gets ids ending with it.
	EOSAfterCut bool
}

// EncodePair tokenizes a rendered prompt and completion separately and cuts them by tr. With
// addEOS (standard data) the tokenizer's EOS ends the completion unless the text already does, as
// tr.EOSAfterCut says. A doubled special token in the text is an error, and so is a completion
// left with no scored token (its own tokens all cut, or one token after a prompt cut away
// entirely: nothing predicts it), which would train on nothing.
func (t *Text) EncodePair(prompt, completion string, addEOS bool, tr Truncation) (Encoded, error) {
	eosText, eos := "", -1
	if addEOS {
		var err error
		if eosText, eos, err = t.EOS(); err != nil {
			return Encoded{}, err
		}
		if strings.HasSuffix(completion, eosText) {
			eosText = ""
		}
	}
	if err := chat.CheckDoubledText(prompt+completion+eosText, t.Specials()); err != nil {
		return Encoded{}, err
	}
	p := t.Tokenizer.Encode(prompt)
	if tr.EOSAfterCut {
		eosText = ""
	}
	c := t.Tokenizer.Encode(completion + eosText)
	if len(c) == 0 {
		return Encoded{}, errors.New("empty completion")
	}
	if n := len(c); tr.Cut != nil {
		if p, c = tr.Cut(p, c, t.BOS(), eos); len(c) == 0 {
			return Encoded{}, fmt.Errorf("completion of %d tokens cut away entirely by truncation (%s): it would train on nothing", n, tr.Lengths)
		}
	}
	if len(p) == 0 && len(c) < 2 {
		return Encoded{}, fmt.Errorf("truncation (%s) leaves one completion token and no prompt: nothing predicts it, so the row would train on nothing", tr.Lengths)
	}
	ids := make([]int32, 0, len(p)+len(c))
	for _, id := range append(p, c...) {
		ids = append(ids, int32(id))
	}
	return Encoded{IDs: ids, Start: len(p)}, nil
}

// withEOS returns s ending with the EOS (appended unless s already ends with it) when addEOS.
func (t *Text) withEOS(s string, addEOS bool) (string, error) {
	if !addEOS {
		return s, nil
	}
	eos, _, err := t.EOS()
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(s, eos) {
		return s, nil
	}
	return s + eos, nil
}

// EncodeText tokenizes a language-modelling text (SFT's "text" rows, or a rendered conversation),
// with the EOS appended when addEOS unless already there (TRL's add_eos) and the tokenizer's BOS
// in front unless there (withSpecialTokens). A doubled special token is an error.
func (t *Text) EncodeText(text string, addEOS bool) ([]int, error) {
	text, err := t.withEOS(text, addEOS)
	if err != nil {
		return nil, err
	}
	if err := chat.CheckDoubledText(text, t.Specials()); err != nil {
		return nil, err
	}
	return t.withSpecialTokens(t.Tokenizer.Encode(text)), nil
}

// withSpecialTokens puts the tokens the tokenizer's post-processor adds around ids (the BOS of
// Llama 3 and Gemma 3; nothing for Qwen), as TRL's SFTTrainer does by tokenizing standard text
// with add_special_tokens=True, unless ids already start (end) with them: a conversation rendered
// by a chat template that writes bos_token itself keeps its one BOS, as TRL's apply_chat_template
// (add_special_tokens=False) gives. (A standard text that itself starts with the BOS text gets no
// second one, where TRL would double it, TRL #1591.)
func (t *Text) withSpecialTokens(ids []int) []int {
	prefix, suffix := t.Tokenizer.SpecialPrefix(), t.Tokenizer.SpecialSuffix()
	if len(prefix) > 0 && !slices.Equal(ids[:min(len(prefix), len(ids))], prefix) {
		ids = append(prefix, ids...)
	}
	if len(suffix) > 0 && (len(ids) < len(suffix) || !slices.Equal(ids[len(ids)-len(suffix):], suffix)) {
		ids = append(ids, suffix...)
	}
	return ids
}

// EncodeJoined tokenizes a prompt and prompt+completion, as TRL's SFTTrainer does for
// prompt-completion rows (the completion mask starts where the prompt's tokens end; both start
// with the BOS of a tokenizer that adds one, withSpecialTokens), with the EOS
// appended to the completion when addEOS unless already there. It is an error when the prompt's
// tokens are not a prefix of the whole's (a token spans the boundary), when the completion adds
// no token, and when a special token is doubled.
func (t *Text) EncodeJoined(prompt, completion string, addEOS bool) (ids []int, start int, err error) {
	completion, err = t.withEOS(completion, addEOS)
	if err != nil {
		return nil, 0, err
	}
	full := prompt + completion
	if err := chat.CheckDoubledText(full, t.Specials()); err != nil {
		return nil, 0, err
	}
	pids, ids := t.Tokenizer.Encode(prompt), t.Tokenizer.Encode(full)
	if suffix := t.Tokenizer.SpecialSuffix(); len(suffix) > 0 {
		return nil, 0, fmt.Errorf("the tokenizer appends %v to every text (add_eos_token): a prompt-completion pair cannot be split after the prompt", suffix)
	}
	pids, ids = t.withSpecialTokens(pids), t.withSpecialTokens(ids)
	if !slices.Equal(pids, ids[:min(len(pids), len(ids))]) {
		return nil, 0, errors.New("the prompt's tokens are not a prefix of prompt+completion's (a token spans the boundary)")
	}
	if len(ids) == len(pids) {
		return nil, 0, errors.New("empty completion")
	}
	return ids, len(pids), nil
}

// EncodeChat renders and tokenizes a conversation with the chat template (and the row's tools,
// nil for none) and marks the tokens of its assistant turns (their content and closing
// end-of-turn token, data/chat's spans).
func (t *Text) EncodeChat(msgs []chat.Message, tools []json.RawMessage) (ids []int, assistant []bool, err error) {
	if t.Template == nil {
		return nil, nil, fmt.Errorf("conversational data needs a chat template, and %s has none", t.Dir)
	}
	tk, err := t.Template.Tokenize(t.Tokenizer, msgs, chat.Options{Tools: tools})
	if err != nil {
		return nil, nil, err
	}
	return tk.IDs, tk.Mask, nil
}
