package data

import (
	"strings"
	"testing"
)

// TRL's dataset_text_field: language-modelling rows read from another column; "text" is then an
// ordinary extra column, and "messages" rows are still conversational.
func TestReadWith_TextField(t *testing.T) {
	src := "{\"content\": \"The sky is blue.\", \"text\": \"ignored\"}\n{\"content\": \"Grass is green.\"}\n"
	d, err := ReadWith(strings.NewReader(src), "mem.jsonl", ReadOptions{TextField: "content"})
	if err != nil {
		t.Fatal(err)
	}
	if d.Format != LanguageModeling || d.Conversational || d.TextField != "content" || len(d.Rows) != 2 {
		t.Fatalf("got %v conversational=%v field %q, %d rows", d.Format, d.Conversational, d.TextField, len(d.Rows))
	}
	if got, want := d.Rows[1].Text.String, "Grass is green."; got != want {
		t.Errorf("row 2 text %q, want %q", got, want)
	}
	if got := d.Rows[0].Columns["text"]; got != "ignored" {
		t.Errorf(`row 1 column "text" = %v, want "ignored" as an extra column`, got)
	}
	def := read(t, `{"text": "a"}`, FormatAuto)
	if def.TextField != DefaultTextField {
		t.Errorf("default TextField %q, want %q", def.TextField, DefaultTextField)
	}
	msgs, err := ReadWith(strings.NewReader(`{"messages": [{"role": "user", "content": "hi"}]}`), "m.jsonl", ReadOptions{TextField: "content"})
	if err != nil || !msgs.Conversational {
		t.Errorf("messages with dataset_text_field content: %v, conversational=%v", err, msgs != nil && msgs.Conversational)
	}
}

// A row without the configured column is an error naming the file, the line and the field.
func TestReadWith_TextFieldMissing(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{\"content\": \"a\"}\n\n{\"text\": \"b\"}\n", `mem.jsonl:3: missing "content" (dataset_text_field) or "messages"`},
		{"{\"text\": \"a\"}\n", `mem.jsonl:1: cannot tell the format from the keys: want "content" (dataset_text_field) or "messages"`},
		{"{\"content\": 3}\n", `mem.jsonl:1: "content" must be a string or a list of messages, got a number`},
		{"{\"content\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}\n", `mem.jsonl:1: both "content" and "messages"`},
	} {
		_, err := ReadWith(strings.NewReader(tc.src), "mem.jsonl", ReadOptions{TextField: "content"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got error %v, want it to contain %q", tc.src, err, tc.want)
		}
	}
}
