// Package data reads and writes datasets in TRL's formats (language modelling, prompt-completion,
// preference, unpaired, prompt-only; standard or conversational) from JSONL and JSON files, and
// keeps the registry of named reward functions. Subpackages: tokenizer (Qwen BPE), chat (chat
// templates, assistant masks), mult (the course's multiplication task and its verifier).
package data

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/posttrain/posttrain/data/chat"
)

// Format is one of TRL's dataset types (trl docs/source/dataset_formats.md).
type Format int

const (
	// FormatAuto detects the format from the first row's keys.
	FormatAuto Format = iota
	// LanguageModeling rows have "text" (standard) or "messages" (conversational).
	LanguageModeling
	// PromptCompletion rows have "prompt" and "completion".
	PromptCompletion
	// Preference rows have "chosen" and "rejected", and "prompt" unless it is implicit.
	Preference
	// Unpaired rows have "prompt", "completion" and a boolean "label" (KTO).
	Unpaired
	// PromptOnly rows have "prompt"; other keys are columns handed to reward functions (GRPO).
	PromptOnly
)

var formatNames = map[Format]string{FormatAuto: "auto", LanguageModeling: "language_modeling",
	PromptCompletion: "prompt_completion", Preference: "preference", Unpaired: "unpaired", PromptOnly: "prompt_only"}

func (f Format) String() string {
	if s, ok := formatNames[f]; ok {
		return s
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ParseFormat reads a format name as String writes it.
func ParseFormat(s string) (Format, error) {
	for f, name := range formatNames {
		if s == name {
			return f, nil
		}
	}
	names := make([]string, 0, len(formatNames))
	for _, n := range formatNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return 0, fmt.Errorf("unknown dataset format %q (valid: %s)", s, strings.Join(names, ", "))
}

// keys returns the keys a format owns, in the order rows are written.
func (f Format) keys() []string {
	switch f {
	case PromptCompletion:
		return []string{"prompt", "completion"}
	case Preference:
		return []string{"prompt", "chosen", "rejected"}
	case Unpaired:
		return []string{"prompt", "completion", "label"}
	case PromptOnly:
		return []string{"prompt"}
	}
	return []string{"text", "messages"}
}

// Text is one TRL text field: a plain string (standard) or a list of messages (conversational).
type Text struct {
	String   string
	Messages []chat.Message // non-nil iff conversational
}

// Conversational reports whether t is a message list.
func (t Text) Conversational() bool { return t.Messages != nil }

// Row is one example. Which fields are set depends on the Dataset's Format.
type Row struct {
	Line int // 1-based line of the row in its file

	Text                                 Text // LanguageModeling
	Prompt, Completion, Chosen, Rejected Text
	Label                                bool // Unpaired: true = desirable

	// Columns holds every other key of the row, JSON-decoded (numbers are float64); GRPO hands
	// them to reward functions (e.g. the multiplication task's "answer").
	Columns map[string]any
	// Tools is the row's "tools" column (also in Columns) as written: the function schemas TRL's
	// SFTTrainer passes to the chat template (apply_chat_template(..., tools=example.get("tools")));
	// nil when the row has none.
	Tools []json.RawMessage
}

// Dataset is a file's rows, all of one format, all standard or all conversational.
type Dataset struct {
	Path           string
	Format         Format
	Conversational bool
	// ImplicitPrompt: preference rows had no "prompt"; it was extracted from chosen/rejected as
	// TRL's extract_prompt does (their longest common prefix) and removed from them.
	ImplicitPrompt bool
	// TextField is the column standard language-modelling rows were read from (TRL's
	// dataset_text_field, "text" by default).
	TextField string
	Rows      []Row

	// A streamed dataset (ReadOptions.Stream) keeps no rows: streamed counts them, each reads
	// them again.
	streamed int
	each     func(func(Row) error) error
}

// Len is the number of rows, kept or streamed.
func (d *Dataset) Len() int { return len(d.Rows) + d.streamed }

// Each hands every row to fn in order: the rows kept, or a streamed dataset's rows read again
// from its files one at a time. fn's error stops it and is returned as is.
func (d *Dataset) Each(fn func(Row) error) error {
	if d.each != nil {
		return d.each(fn)
	}
	for _, r := range d.Rows {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// appendRows adds d2's rows (or count, streamed) to d's.
func (d *Dataset) appendRows(d2 *Dataset) {
	d.Rows = append(d.Rows, d2.Rows...)
	d.streamed += d2.streamed
}

// keys returns the keys the dataset's format owns: Format.keys with the text column TextField.
func (d *Dataset) keys() []string {
	keys := d.Format.keys()
	if d.Format == LanguageModeling && d.TextField != "" {
		keys[0] = d.TextField
	}
	return keys
}

// Columns gathers the extra columns of rows as TRL passes them to reward functions:
// name → one value per row (nil where a row lacks the column).
func Columns(rows []Row) map[string][]any {
	out := map[string][]any{}
	for i, r := range rows {
		for k, v := range r.Columns {
			if out[k] == nil {
				out[k] = make([]any, len(rows))
			}
			out[k][i] = v
		}
	}
	return out
}

// detectFormat picks the format from a row's keys, as TRL's docs define the types.
// textField is the language-modelling text column (TRL's dataset_text_field, "" = "text").
func detectFormat(has func(string) bool, textField string) (Format, error) {
	if textField == "" {
		textField = DefaultTextField
	}
	switch {
	case has(textField) || has("messages"):
		return LanguageModeling, nil
	case has("chosen") && has("rejected"):
		return Preference, nil
	case has("prompt") && has("completion") && has("label"):
		return Unpaired, nil
	case has("prompt") && has("completion"):
		return PromptCompletion, nil
	case has("prompt"):
		return PromptOnly, nil
	}
	text := `"text"`
	if textField != DefaultTextField {
		text = fmt.Sprintf("%q (dataset_text_field)", textField)
	}
	return 0, fmt.Errorf(`cannot tell the format from the keys: want %s or "messages", "prompt"+"completion", ["prompt"+]"chosen"+"rejected", "prompt"+"completion"+"label", or "prompt"`, text)
}
