package data

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
)

func read(t *testing.T, src string, f Format) *Dataset {
	t.Helper()
	d, err := Read(strings.NewReader(src), "mem.jsonl", f)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return d
}

func msg(role, content string) chat.Message { return chat.Message{Role: role, Content: content} }

func TestRead_DetectsFormats(t *testing.T) {
	for _, tc := range []struct {
		src            string
		format         Format
		conversational bool
	}{
		{`{"text": "The sky is blue."}`, LanguageModeling, false},
		{`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}`, LanguageModeling, true},
		{`{"prompt": "The sky is", "completion": " blue."}`, PromptCompletion, false},
		{`{"prompt": [{"role": "user", "content": "sky?"}], "completion": [{"role": "assistant", "content": "blue"}]}`, PromptCompletion, true},
		{`{"prompt": "The sky is", "chosen": " blue.", "rejected": " green."}`, Preference, false},
		{`{"prompt": "The sky is", "completion": " blue.", "label": true}`, Unpaired, false},
		{`{"prompt": [{"role": "user", "content": "3×4?"}], "answer": "12"}`, PromptOnly, true},
		{"[\n {\"prompt\": \"a\"},\n {\"prompt\": \"b\"}\n]\n", PromptOnly, false},
		{"\ufeff[{\"prompt\": \"a\"}]", PromptOnly, false},
		{"\ufeff{\"prompt\": \"a\"}", PromptOnly, false},
	} {
		d := read(t, tc.src, FormatAuto)
		if d.Format != tc.format || d.Conversational != tc.conversational {
			t.Errorf("%s: got %v conversational=%v, want %v %v", tc.src, d.Format, d.Conversational, tc.format, tc.conversational)
		}
	}
}

func TestRead_RowsAndColumns(t *testing.T) {
	src := `{"prompt": [{"role": "user", "content": "3×4?"}], "answer": "12", "level": 2}

{"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "5×6?"}], "answer": "30"}
`
	d := read(t, src, PromptOnly)
	if len(d.Rows) != 2 || d.Rows[0].Line != 1 || d.Rows[1].Line != 3 {
		t.Fatalf("rows %+v", d.Rows)
	}
	want := []chat.Message{msg("system", "Be brief."), msg("user", "5×6?")}
	if !reflect.DeepEqual(d.Rows[1].Prompt.Messages, want) {
		t.Errorf("prompt %+v", d.Rows[1].Prompt.Messages)
	}
	cols := Columns(d.Rows)
	if !reflect.DeepEqual(cols["answer"], []any{"12", "30"}) || !reflect.DeepEqual(cols["level"], []any{2.0, nil}) {
		t.Errorf("columns %v", cols)
	}
}

// TRL's docs (dataset_formats.md, extract_prompt): "The sky is" + " blue." / " green.".
func TestRead_ImplicitPrompt(t *testing.T) {
	d := read(t, `{"chosen": "The sky is blue.", "rejected": "The sky is green."}`, FormatAuto)
	r := d.Rows[0]
	if !d.ImplicitPrompt || r.Prompt.String != "The sky is" || r.Chosen.String != " blue." || r.Rejected.String != " green." {
		t.Errorf("got %q %q %q implicit=%v", r.Prompt.String, r.Chosen.String, r.Rejected.String, d.ImplicitPrompt)
	}
	d = read(t, `{"chosen": [{"role": "user", "content": "sky?"}, {"role": "assistant", "content": "blue"}], "rejected": [{"role": "user", "content": "sky?"}, {"role": "assistant", "content": "green"}]}`, Preference)
	r = d.Rows[0]
	if !reflect.DeepEqual(r.Prompt.Messages, []chat.Message{msg("user", "sky?")}) ||
		!reflect.DeepEqual(r.Chosen.Messages, []chat.Message{msg("assistant", "blue")}) ||
		!reflect.DeepEqual(r.Rejected.Messages, []chat.Message{msg("assistant", "green")}) {
		t.Errorf("conversational implicit prompt: %+v", r)
	}
}

func TestRead_Errors(t *testing.T) {
	for _, tc := range []struct {
		src    string
		format Format
		want   string
	}{
		{"{\"text\": \"a\"}\n{\"text\": \"b\"\n", FormatAuto, "mem.jsonl:2: invalid JSON"},
		{`["x"]`, FormatAuto, "mem.jsonl:1: row must be a JSON object, got a string"},
		{`{"foo": 1}`, FormatAuto, "mem.jsonl:1: cannot tell the format"},
		{"{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"a\"}", FormatAuto, `mem.jsonl:2: missing "completion"`},
		{`{"prompt": 3, "completion": "b"}`, FormatAuto, `"prompt" must be a string or a list of messages, got a number`},
		{`{"messages": []}`, FormatAuto, `"messages" is an empty list of messages`},
		{`{"messages": [{"role": "robot", "content": "x"}]}`, FormatAuto, `"messages"[0]: unknown role "robot"`},
		{`{"messages": [{"content": "x"}]}`, FormatAuto, `has no "role"`},
		{`{"messages": [{"role": "user", "content": 5}]}`, FormatAuto, `"content" must be a string`},
		{`{"messages": ["hi"]}`, FormatAuto, `a message must be an object`},
		{`{"text": [{"role": "user", "content": "x"}]}`, FormatAuto, `"text" must be a string`},
		{`{"text": "a", "messages": [{"role": "user", "content": "x"}]}`, FormatAuto, `both "text" and "messages"`},
		{`{"prompt": "a", "completion": "b", "label": "yes"}`, FormatAuto, `"label" must be true or false, got a string`},
		{`{"prompt": "a", "completion": [{"role": "assistant", "content": "b"}]}`, FormatAuto, "mixes conversational"},
		{"{\"prompt\": \"a\"}\n{\"prompt\": [{\"role\": \"user\", \"content\": \"b\"}]}", FormatAuto, "mem.jsonl:2: row is conversational but the rows before it are standard"},
		{"{\"prompt\": \"a\", \"chosen\": \"b\", \"rejected\": \"c\"}\n{\"chosen\": \"b\", \"rejected\": \"c\"}", FormatAuto, `mem.jsonl:2: "prompt" present in some`},
		{`{"chosen": "", "rejected": "x"}`, FormatAuto, "chosen or rejected is empty"},
		// A message list against a string, with the prompt implicit, read as "chosen or rejected is empty".
		{`{"chosen": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], "rejected": "c"}`, FormatAuto,
			`mem.jsonl:1: mixes conversational and standard fields: "chosen" is a message list, "rejected" is a string`},
		{`{"chosen": "a b", "rejected": [{"role": "user", "content": "a"}]}`, FormatAuto,
			`mem.jsonl:1: mixes conversational and standard fields: "chosen" is a string, "rejected" is a message list`},
		{`{"prompt": "a", "chosen": [{"role": "assistant", "content": "b"}], "rejected": "c"}`, FormatAuto, `"chosen" is a message list, "rejected" is a string`},
		{`{"chosen": [{"role": "user", "content": "a"}], "rejected": [{"role": "user", "content": "b"}]}`, FormatAuto, "share no leading message"},
		{`{"prompt": "a"}`, PromptCompletion, `missing "completion" (format prompt_completion)`},
		{"\n\n", FormatAuto, "mem.jsonl: no rows"},
		{"[\n{\"prompt\": \"a\"},\n\n{\"prompt\": 1}\n]", FormatAuto, `mem.jsonl:4: "prompt" must be`},
		{"[\n{\"prompt\": \"a\"},\n{\"prompt\": \"b\"\n", FormatAuto, "mem.jsonl:3: invalid JSON"},
		{"[{\"prompt\": \"a\"}] {}", FormatAuto, "data after the top-level array"},
	} {
		_, err := Read(strings.NewReader(tc.src), "mem.jsonl", tc.format)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: got error %v, want one containing %q", tc.src, err, tc.want)
		}
	}
}

func TestWriteJSONL_RoundTrip(t *testing.T) {
	for _, src := range []string{
		`{"prompt":[{"role":"user","content":"3×4는 <b>?"}],"completion":[{"role":"assistant","content":"12"}]}`,
		`{"prompt":"a","chosen":"b","rejected":"c","margin":0.5}`,
		`{"prompt":[{"role":"user","content":"q"}],"completion":[{"role":"assistant","content":"","tool_calls":[{"function":{"arguments":{"b":1,"a":2},"name":"f"}}]}],"label":false}`,
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"prompt":[{"role":"user","content":"3×4?"}],"answer":"12"}`,
	} {
		d := read(t, src, FormatAuto)
		var b bytes.Buffer
		if err := WriteJSONL(&b, d.Format, d.Rows); err != nil {
			t.Fatal(err)
		}
		if got := strings.TrimSpace(b.String()); got != src {
			t.Errorf("round trip:\n got %s\nwant %s", got, src)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for f := FormatAuto; f <= PromptOnly; f++ {
		got, err := ParseFormat(f.String())
		if err != nil || got != f {
			t.Errorf("ParseFormat(%s) = %v, %v", f, got, err)
		}
	}
	if _, err := ParseFormat("dpo"); err == nil {
		t.Error("ParseFormat(dpo): want an error")
	}
}
