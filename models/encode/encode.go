// Package encode is the text side of a checkpoint, in one place for every trainer, evaluation and
// command: its tokenizer, chat template and special tokens (EOS, BOS), the SFT options that change
// them (eos_token, chat_template_path with TRL's clone_chat_template) and what a saved model must
// say about them, prompt rendering and prompt extraction from dataset rows, the encodings of
// prompt/completion text into token ids with TRL's EOS rules, and the ids generation stops at.
//
// It holds no trainer's rules: DPO's and KTO's truncation live in trainers/dpo and trainers/kto and
// reach EncodePair as a Truncation; the weights are trainers/engine/trainable's Model (or models/decoder's).
package encode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/models/decoder"
)

// Text is a checkpoint's text side: tokenizer.json, tokenizer_config.json and its chat template,
// with the replacements SetEOSToken and SetChatTemplate make for a run.
type Text struct {
	Dir       string // the checkpoint (or tokenizer) directory it was read from
	Tokenizer *tokenizer.BPE
	Template  *chat.Template // nil when the checkpoint has no chat template (or it was not read)
	// PromptTools are the function schemas rendered into every prompt (the template's `tools`):
	// GRPO's tools, as TRL 1.x renders its prompts with tools=self.tools; nil for none.
	PromptTools []json.RawMessage

	// eos replaces the tokenizer's eos_token when set (SFT's eos_token, a cloned chat template);
	// SaveChanges writes it into the output's tokenizer_config.json.
	eos string
	// template is set when the chat template was replaced (SFT's chat_template_path); SaveChanges
	// writes its source into the output's tokenizer_config.json.
	template string
	// eosID ≥ 0 is the eos_token_id a cloned chat template gives config.json and
	// generation_config.json (ConfigEOS; -1: they keep theirs).
	eosID int
	// pad replaces the tokenizer's pad_token when set (the reward trainer's pad token, SetPadToken);
	// SaveChanges writes it into the output's tokenizer_config.json and special_tokens_map.json.
	pad string
}

// TemplateMode says how Load treats the checkpoint's chat template.
type TemplateMode int

const (
	// TemplateIfAny reads the chat template; a checkpoint whose tokenizer_config.json carries none
	// at all (a base model) loads with Template nil, which is an error only once conversational
	// data needs one. A template that is there but does not load is an error. The trainers' mode.
	TemplateIfAny TemplateMode = iota
	// TemplateRequired reads the chat template; its absence is an error (chat.Load's).
	TemplateRequired
	// NoTemplate does not read the chat template (plain-text prompts).
	NoTemplate
)

// Options are Load's options; the zero value is the trainers'.
type Options struct {
	Template TemplateMode
	// VocabSize > 0 is the model's vocab_size: a tokenizer with more tokens is an error.
	VocabSize int
}

// Load reads the text side of the checkpoint (or tokenizer directory) dir: the tokenizer, then
// (Options.VocabSize) its size against the model's, then the chat template as o.Template says.
// Errors are the tokenizer's and the template's own, for the caller to wrap.
func Load(dir string, o Options) (*Text, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	if o.VocabSize > 0 && tok.VocabSize() > o.VocabSize {
		return nil, fmt.Errorf("the tokenizer has %d tokens but the model's vocab_size is %d", tok.VocabSize(), o.VocabSize)
	}
	t := &Text{Dir: dir, Tokenizer: tok, eosID: -1}
	switch o.Template {
	case TemplateIfAny:
		if t.Template, err = chat.Load(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !hasNoTemplate(dir) {
			return nil, err
		}
	case TemplateRequired:
		if t.Template, err = chat.Load(dir); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// hasNoTemplate reports whether dir's tokenizer_config.json carries no chat template at all (a
// base model), which is not an error until conversational data needs one.
func hasNoTemplate(dir string) bool {
	cfg, err := tokenizer.LoadConfig(dir)
	return err == nil && cfg.ChatTemplate == ""
}

// EOS is the end-of-sequence token text and id: tokenizer_config.json's eos_token ("<|im_end|>"
// for Qwen instruct models) or its replacement (SetEOSToken, SetChatTemplate), appended to
// standard (non-conversational) completions as TRL does.
func (t *Text) EOS() (string, int, error) {
	eos := t.Tokenizer.Config().EOSToken
	if t.eos != "" {
		eos = t.eos
	}
	if eos == "" {
		return "", 0, errors.New("the tokenizer has no eos_token (tokenizer_config.json)")
	}
	id, ok := t.Tokenizer.TokenToID(eos)
	if !ok {
		return "", 0, fmt.Errorf("eos_token %q is not a token", eos)
	}
	return eos, id, nil
}

// BOS is the id of the tokenizer's bos_token, -1 if it has none (Qwen2).
func (t *Text) BOS() int {
	if b := t.Tokenizer.Config().BOSToken; b != "" {
		if id, ok := t.Tokenizer.TokenToID(b); ok {
			return id
		}
	}
	return -1
}

// Specials are the special-token strings that must not appear doubled in a rendered example: the
// chat template's, or the EOS without one.
func (t *Text) Specials() []string {
	if t.Template != nil {
		return t.Template.SpecialStrings()
	}
	eos, _, _ := t.EOS()
	return []string{eos}
}

// StopIDs are every end-of-sequence id of the checkpoint whose config is cfg: config.json's and
// generation_config.json's eos_token_id (decoder.EOSTokenIDs) and tokenizer_config.json's own
// eos_token (TRL #7039: honour them all, e.g. Qwen's <|im_end|> and <|endoftext|>). The file's
// eos_token is read, not a replacement made for the run. No id at all is an error.
func (t *Text) StopIDs(cfg *decoder.Config) ([]int, error) {
	ids, err := decoder.EOSTokenIDs(t.Dir, cfg)
	if err != nil {
		return nil, err
	}
	if eos := t.Tokenizer.Config().EOSToken; eos != "" {
		if id, ok := t.Tokenizer.TokenToID(eos); ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: no end-of-sequence id (eos_token_id in config.json or generation_config.json, eos_token in tokenizer_config.json)", t.Dir)
	}
	return ids, nil
}
