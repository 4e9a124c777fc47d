package data

import (
	"bufio"
	"bytes"
	"os"
	"testing"
)

// FuzzRead checks that no dataset file makes Read panic, for every format (FormatAuto and each
// TRL format, plus an unknown one) and for the default and a custom text field, and that what
// it accepts writes back as JSONL that reads again to as many rows of the same format.
// Seeds: the first rows of the multiplication course files (conversational preference and
// prompt-only) and hand-made rows of every format, standard and conversational, JSONL and JSON.
func FuzzRead(f *testing.F) {
	for _, path := range []string{"mult/testdata/course_dpo_seed7.jsonl", "mult/testdata/course_grpo_seed7.jsonl"} {
		file, err := os.Open(path)
		if err != nil {
			f.Fatal(err)
		}
		var head []byte
		sc := bufio.NewScanner(file)
		for i := 0; i < 3 && sc.Scan(); i++ {
			head = append(append(head, sc.Bytes()...), '\n')
		}
		file.Close()
		for format := range uint8(PromptOnly + 1) {
			f.Add(head, format, false)
		}
	}
	rows := []string{
		`{"text": "The sky is blue."}` + "\n\n" + `{"text": "ok", "id": 3}`,
		`{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}`,
		`{"prompt": "2+2=", "completion": " 4"}`,
		`{"prompt": [{"role": "user", "content": "hi"}], "completion": [{"role": "assistant", "content": "yo"}]}`,
		`{"prompt": "Q", "chosen": " yes", "rejected": " no"}`,
		`{"chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "rejected": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "b"}]}`,
		`{"chosen": "Q: a", "rejected": "Q: b"}`,
		`{"prompt": "Q", "completion": " a", "label": true}` + "\n" + `{"prompt": "Q", "completion": " b", "label": false}`,
		`{"prompt": [{"role": "user", "content": "3×4?"}], "answer": "12"}`,
		`[{"prompt": "a", "completion": "b"}, {"prompt": "c", "completion": "d"}]`,
		`{"content": "custom text field"}`,
		"\ufeff" + `{"text": "bom"}`,
		`{"messages": [{"role": "user", "content": null}]}`,
		`{"messages": [{"role": "user", "content": "a", "tool_calls": [{"name": "f"}]}]}`,
		`{"prompt": "Q", "completion": [{"role": "assistant", "content": "mixed"}]}`,
		`{"prompt": "Q", "completion": "a", "label": "yes"}`,
		`{"text": "\ud800 lone surrogate \xff"}`,
		`[{"text": "a"}, 3]`,
		`{"text": "a"} {"text": "b"}`,
		``,
	}
	for _, r := range rows {
		f.Add([]byte(r), uint8(FormatAuto), false)
		f.Add([]byte(r), uint8(FormatAuto), true)
	}
	f.Add([]byte(rows[2]), uint8(PromptOnly+1), false)
	f.Fuzz(func(t *testing.T, b []byte, format uint8, custom bool) {
		o := ReadOptions{Format: Format(format)}
		if custom {
			o.TextField = "content"
		}
		d, err := ReadWith(bytes.NewReader(b), "fuzz.jsonl", o)
		if err != nil {
			if d != nil {
				t.Fatalf("ReadWith returned a dataset with error %v", err)
			}
			return
		}
		if len(d.Rows) == 0 {
			t.Fatal("accepted a dataset without rows")
		}
		if d.Format == FormatAuto {
			t.Fatal("accepted a dataset without a format")
		}
		_ = Columns(d.Rows)
		if custom {
			return // WriteJSONL writes "text"; the round trip below is for the default field
		}
		var out bytes.Buffer
		if err := WriteJSONL(&out, d.Format, d.Rows); err != nil {
			t.Fatalf("accepted rows do not write back: %v", err)
		}
		again, err := Read(&out, "again.jsonl", d.Format)
		if err != nil {
			t.Fatalf("written rows do not read back: %v\n%s", err, out.Bytes())
		}
		if len(again.Rows) != len(d.Rows) || again.Conversational != d.Conversational {
			t.Fatalf("round trip: %d rows (conversational %v), want %d (%v)", len(again.Rows), again.Conversational, len(d.Rows), d.Conversational)
		}
	})
}
