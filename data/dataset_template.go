package data

import (
	"fmt"

	"github.com/posttrain/posttrain/data/chat"
)

// ApplyChatTemplate turns a conversational dataset into a standard one as TRL's
// maybe_apply_chat_template (trl/data_utils.py) does, so trainers see plain strings:
//
//	text       = render(messages)
//	prompt     = render(prompt, add_generation_prompt=true)
//	completion = render(prompt + completion)[len(prompt):]   (likewise chosen and rejected)
//
// With Qwen's template a completion ends "<|im_end|>\n": it already holds the end-of-turn token,
// so a trainer must not append EOS again (TRL #4481; chat.CheckDoubledText catches it). Columns are
// kept. A standard dataset is returned as is. Errors name the row's file and line.
func ApplyChatTemplate(t *chat.Template, d *Dataset, opt chat.Options) (*Dataset, error) {
	if !d.Conversational {
		return d, nil
	}
	out := *d
	out.Conversational = false
	out.Rows = make([]Row, len(d.Rows))
	for i, r := range d.Rows {
		nr, err := ApplyChatTemplateRow(t, d, r, opt)
		if err != nil {
			return nil, err
		}
		out.Rows[i] = nr
	}
	return &out, nil
}

// ApplyChatTemplateRow is ApplyChatTemplate on one row r of the conversational dataset d (a
// streamed dataset's row, as it comes).
func ApplyChatTemplateRow(t *chat.Template, d *Dataset, r Row, opt chat.Options) (Row, error) {
	nr, err := applyRow(t, d.Format, r, opt)
	if err != nil {
		return Row{}, fmt.Errorf("%s:%d: %w", d.Path, r.Line, err)
	}
	return nr, nil
}

func applyRow(t *chat.Template, f Format, r Row, opt chat.Options) (Row, error) {
	nr := Row{Line: r.Line, Label: r.Label, Columns: r.Columns, Tools: r.Tools}
	// The row's own tools for SFT's formats, as TRL's SFTTrainer passes them
	// (tools=example.get("tools")); DPO's and KTO's trainers take none from the row.
	if r.Tools != nil && opt.Tools == nil && (f == LanguageModeling || f == PromptCompletion) {
		opt.Tools = r.Tools
	}
	if f == LanguageModeling {
		o := opt
		o.AddGenerationPrompt = false
		s, err := t.Render(r.Text.Messages, o)
		nr.Text = Text{String: s}
		return nr, err
	}
	pc := func(c Text) (string, string, error) {
		return t.PromptCompletion(r.Prompt.Messages, c.Messages, opt)
	}
	var p string
	var err error
	switch f {
	case PromptCompletion, Unpaired:
		var c string
		p, c, err = pc(r.Completion)
		nr.Completion = Text{String: c}
	case Preference:
		var c, rj string
		if p, c, err = pc(r.Chosen); err == nil {
			_, rj, err = pc(r.Rejected)
		}
		nr.Chosen, nr.Rejected = Text{String: c}, Text{String: rj}
	case PromptOnly:
		o := opt
		o.AddGenerationPrompt = true
		p, err = t.Render(r.Prompt.Messages, o)
	default:
		err = fmt.Errorf("unknown format %v", f)
	}
	nr.Prompt = Text{String: p}
	return nr, err
}
