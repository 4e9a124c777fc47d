package data

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Text that encoding/json would silently replace by U+FFFD is an error naming file:line; a valid
// surrogate pair and an escaped backslash before "ud800" are text like any other.
func TestReadFile_RefusesInvalidUTF8AndLoneSurrogates(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		row  string
		want string // "" = reads
	}{
		"latin1":    {"{\"text\": \"caf\xe9\"}", "invalid UTF-8 at byte"},
		"lone high": {`{"text": "a\ud800b"}`, `lone UTF-16 surrogate \uD800`},
		"high+high": {`{"text": "\ud800\ud800"}`, `lone UTF-16 surrogate \uD800`},
		"lone low":  {`{"text": "\udc00"}`, `lone UTF-16 surrogate \uDC00`},
		"pair":      {`{"text": "smile \ud83d\ude00 \u00e9"}`, ""},
		"escaped":   {`{"text": "a\\ud800 is text"}`, ""},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
		if err := os.WriteFile(path, []byte(`{"text": "ok"}`+"\n"+c.row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		d, err := ReadFile(path, FormatAuto)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want == "" && (len(d.Rows) != 2 || strings.ContainsRune(d.Rows[1].Text.String, '\uFFFD')):
			t.Errorf("%s: rows %+v", name, d.Rows)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), path+":2: ") || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: want an error at %s:2 containing %q, got %v", name, path, c.want, err)
		}
	}
}

// A message whose content is null or missing is an error naming file:line (it rendered as empty
// text); an assistant message that calls tools may have a null content, as in the OpenAI format.
func TestReadFile_MessageContentRequired(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		row  string
		want string
	}{
		"null":      {`{"messages": [{"role": "user", "content": null}, {"role": "assistant", "content": "x"}]}`, `user message has no "content"`},
		"missing":   {`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant"}]}`, `assistant message has no "content"`},
		"tool call": {`{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {}}}]}, {"role": "tool", "content": "1"}, {"role": "assistant", "content": "ok"}]}`, ""},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
		if err := os.WriteFile(path, []byte(c.row+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := ReadFile(path, FormatAuto)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), path+":1: ") || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
}
