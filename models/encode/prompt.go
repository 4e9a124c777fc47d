package encode

import (
	"errors"
	"fmt"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
)

// errNoTemplate is the error of conversational prompts on a checkpoint without a chat template.
var errNoTemplate = errors.New("conversational prompts need a chat template, and the model has none")

// Prompt is a prompt to generate from: the rendered text (what the reward functions receive as the
// prompt), its token ids, and the other columns of its dataset row.
type Prompt struct {
	Text    string
	IDs     []int32
	Columns map[string]any
	// Source is the row's prompt as given (its messages, for a reward model's own chat template).
	Source data.Text
	Line   int // the row's line in its file (0: not read from a file)
}

// RenderPrompt renders a conversation with the chat template and add_generation_prompt, the text
// a model continues with its answer.
func (t *Text) RenderPrompt(msgs []chat.Message) (string, error) {
	if t.Template == nil {
		return "", errNoTemplate
	}
	return t.Template.Render(msgs, chat.Options{AddGenerationPrompt: true, Tools: t.PromptTools})
}

// Prompts renders prompt-only rows as TRL does (conversational prompts through the chat template
// with add_generation_prompt, RenderPrompt; standard prompts as they are) and tokenizes them. An
// empty prompt is an error naming its row (1-based).
func (t *Text) Prompts(rows []data.Row) ([]*Prompt, error) {
	out := make([]*Prompt, 0, len(rows))
	for i, r := range rows {
		text := r.Prompt.String
		if t.PromptTools != nil && !r.Prompt.Conversational() {
			return nil, fmt.Errorf("row %d: a standard (text) prompt cannot show the tools: tools need conversational prompts, which the chat template renders with them", i+1)
		}
		if r.Prompt.Conversational() {
			if t.Template == nil {
				return nil, errNoTemplate
			}
			var err error
			if text, err = t.RenderPrompt(r.Prompt.Messages); err != nil {
				return nil, fmt.Errorf("row %d: %w", i+1, err)
			}
		}
		ids := t.Tokenizer.Encode(text)
		if len(ids) == 0 {
			return nil, fmt.Errorf("row %d: the prompt is empty", i+1)
		}
		p := &Prompt{Text: text, Columns: r.Columns, Source: r.Prompt, Line: r.Line, IDs: make([]int32, len(ids))}
		for j, id := range ids {
			p.IDs[j] = int32(id)
		}
		out = append(out, p)
	}
	return out, nil
}

// Standard renders a conversational dataset with the chat template (TRL's
// maybe_apply_chat_template) and returns it with addEOS = false (the template closes every turn);
// a standard dataset is returned as is with addEOS = true.
func (t *Text) Standard(d *data.Dataset) (out *data.Dataset, addEOS bool, err error) {
	if !d.Conversational {
		return d, true, nil
	}
	if t.Template == nil {
		return nil, false, fmt.Errorf("%s: conversational data needs a chat template, and %s has none", d.Path, t.Dir)
	}
	out, err = data.ApplyChatTemplate(t.Template, d, chat.Options{})
	return out, false, err
}
