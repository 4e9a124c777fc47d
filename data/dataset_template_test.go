package data

import (
	"os"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
)

func qwen25(t *testing.T) *chat.Template {
	t.Helper()
	src, err := os.ReadFile("chat/testdata/qwen25_chat_template.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.Parse(string(src), map[string]string{"eos_token": "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

const qwenSystem = "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"

func TestApplyChatTemplate(t *testing.T) {
	tpl := qwen25(t)
	src := `{"prompt": [{"role": "user", "content": "3×4?"}], "chosen": [{"role": "assistant", "content": "12"}], "rejected": [{"role": "assistant", "content": "16"}], "id": 7}`
	d, err := ApplyChatTemplate(tpl, read(t, src, FormatAuto), chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := d.Rows[0]
	wantPrompt := qwenSystem + "<|im_start|>user\n3×4?<|im_end|>\n<|im_start|>assistant\n"
	if d.Conversational || r.Prompt.String != wantPrompt || r.Chosen.String != "12<|im_end|>\n" ||
		r.Rejected.String != "16<|im_end|>\n" || r.Columns["id"] != 7.0 {
		t.Errorf("got %+v", r)
	}
	for _, tc := range []struct{ src, want string }{
		{`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}`,
			qwenSystem + "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nyo<|im_end|>\n"},
		{`{"prompt": [{"role": "user", "content": "hi"}], "answer": "x"}`,
			qwenSystem + "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"},
		{`{"prompt": [{"role": "user", "content": "hi"}], "completion": [{"role": "assistant", "content": "yo"}], "label": false}`,
			"yo<|im_end|>\n"},
	} {
		d, err := ApplyChatTemplate(tpl, read(t, tc.src, FormatAuto), chat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := d.Rows[0]
		got := r.Prompt.String
		switch d.Format {
		case LanguageModeling:
			got = r.Text.String
		case Unpaired:
			got = r.Completion.String
		}
		if got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.src, got, tc.want)
		}
	}
	// Standard datasets pass through; template errors name the row.
	std := read(t, `{"prompt": "a", "completion": "b"}`, FormatAuto)
	if d, err := ApplyChatTemplate(tpl, std, chat.Options{}); err != nil || d != std {
		t.Errorf("standard dataset: %v", err)
	}
	bad, err := chat.Parse("{{ raise_exception('no') }}", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ApplyChatTemplate(bad, read(t, "\n"+`{"prompt": [{"role": "user", "content": "hi"}]}`, FormatAuto), chat.Options{})
	if err == nil || !strings.Contains(err.Error(), "mem.jsonl:2: chat template raised: no") {
		t.Errorf("got %v", err)
	}
}
