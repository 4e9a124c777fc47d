package chat

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// toyEncoder encodes special tokens as one id each and other text rune by rune, except that a run
// of newlines is one token (as Qwen's pre-tokenizer's \s*[\r\n]+ makes it), so a span boundary
// inside "\n\n" splits a token.
type toyEncoder struct{ specials []string }

func (e toyEncoder) Encode(text string) []int {
	var ids []int
	for len(text) > 0 {
		matched := false
		for i, s := range e.specials {
			if strings.HasPrefix(text, s) {
				ids, text, matched = append(ids, 1000000+i), text[len(s):], true
				break
			}
		}
		if matched {
			continue
		}
		if text[0] == '\n' {
			n := len(text) - len(strings.TrimLeft(text, "\n"))
			ids, text = append(ids, 2000000+n), text[n:]
			continue
		}
		r := []rune(text)[0]
		ids, text = append(ids, int(r)), text[len(string(r)):]
	}
	return ids
}

func (e toyEncoder) TokenToID(s string) (int, bool) {
	for i, sp := range e.specials {
		if sp == s {
			return 1000000 + i, true
		}
	}
	return 0, false
}

var qwenSpecials = []string{"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>"}

func goldenConv(t *testing.T, name string) []Message {
	t.Helper()
	var g struct {
		Cases []goldenCase `json:"cases"`
	}
	readJSON(t, "jinja_golden.json", &g)
	for _, c := range g.Cases {
		if c.Name == name {
			return c.Messages
		}
	}
	var convs []conv
	readJSON(t, "convs.json", &convs)
	for _, c := range convs {
		if c.Name == name {
			return c.Messages
		}
	}
	t.Fatalf("no conversation %s", name)
	return nil
}

func TestAssistantSpans(t *testing.T) {
	special := map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
	q25 := parseFile(t, "qwen25_chat_template.jinja", special)
	q3 := parseFile(t, "qwen3_chat_template.jinja", special)
	for _, tc := range []struct {
		tpl  *Template
		conv string
		want []string
	}{
		{q25, "system_user_assistant", []string{"2+2 = 4.<|im_end|>"}},
		{q3, "system_user_assistant", []string{"<think>\n\n</think>\n\n2+2 = 4.<|im_end|>"}},
		{q25, "user_assistant_user", []string{"Hello! How can I help?<|im_end|>"}},
		{q3, "think_in_history", []string{"12<|im_end|>"}},
		{q3, "think_last", []string{"<think>\n3 fours\n</think>\n\n12<|im_end|>"}},
		{q3, "reasoning_content", []string{"<think>\ntwo twos\n</think>\n\n4<|im_end|>"}},
		{q25, "system_mid", []string{"<|im_end|>"}},
		{q25, "multi_step_tools", []string{
			"Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Seoul\", \"days\": 2, \"x\": [1.5, -0.0, \"é\\\"\\\\\"]}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Busan\\\"}\"}\n</tool_call><|im_end|>",
			"Seoul 3°C, Busan 9°C.<|im_end|>", "Done.<|im_end|>"}},
		{q3, "multi_step_tools", []string{
			"Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Seoul\", \"days\": 2, \"x\": [1.5, -0.0, \"é\\\"\\\\\"]}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Busan\"}}\n</tool_call><|im_end|>",
			"Seoul 3°C, Busan 9°C.<|im_end|>", "<think>\n\n</think>\n\nDone.<|im_end|>"}},
	} {
		msgs := goldenConv(t, tc.conv)
		text, spans, err := tc.tpl.AssistantSpans(msgs, Options{})
		if err != nil {
			t.Fatalf("%s: %v", tc.conv, err)
		}
		whole, _ := tc.tpl.Render(msgs, Options{})
		if text != whole {
			t.Errorf("%s: AssistantSpans text differs from Render", tc.conv)
		}
		var got []string
		for _, s := range spans {
			if msgs[s.Message].Role != "assistant" {
				t.Errorf("%s: span of a %s message", tc.conv, msgs[s.Message].Role)
			}
			got = append(got, text[s.Start:s.End])
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("%s: spans\n got %q\nwant %q", tc.conv, got, tc.want)
		}
		enc := toyEncoder{qwenSpecials}
		tok, err := tc.tpl.Tokenize(enc, msgs, Options{})
		if err != nil {
			t.Fatalf("%s: Tokenize: %v", tc.conv, err)
		}
		var masked []int
		for i, m := range tok.Mask {
			if m {
				masked = append(masked, tok.IDs[i])
			}
		}
		if want := enc.Encode(strings.Join(tc.want, "")); !slices.Equal(masked, want) {
			t.Errorf("%s: masked tokens %v, want %v", tc.conv, masked, want)
		}
	}
}

func TestTokenMask_BoundaryInsideToken(t *testing.T) {
	enc := toyEncoder{qwenSpecials}
	// The span starts between two newlines, which the encoder merges into one token.
	text := "a\n\nb"
	if _, _, err := TokenMask(enc, text, []Span{{Start: 2, End: 4}}); err == nil {
		t.Error("boundary inside a token: want an error")
	}
	ids, mask, err := TokenMask(enc, text, []Span{{Start: 3, End: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, []int{'a', 2000002, 'b'}) || !slices.Equal(mask, []bool{false, false, true}) {
		t.Errorf("ids %v mask %v", ids, mask)
	}
}

func TestAssistantSpans_Errors(t *testing.T) {
	special := map[string]string{"eos_token": "<|im_end|>"}
	q25 := parseFile(t, "qwen25_chat_template.jinja", special)
	msgs := []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "x<|im_end|>"}}
	if _, _, err := q25.AssistantSpans(msgs, Options{}); err == nil {
		t.Error("end-of-turn token inside content: want an error")
	}
	// A template that renders history differently once more messages follow.
	unstable, err := Parse("{% for m in messages %}{{ m.content if loop.last else m.content|upper }}<|im_end|>{% endfor %}", special)
	if err != nil {
		t.Fatal(err)
	}
	msgs = []Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "ok"}, {Role: "user", Content: "more"}}
	if _, _, err := unstable.AssistantSpans(msgs, Options{}); err == nil || !strings.Contains(err.Error(), "prefix not stable") {
		t.Errorf("unstable template: got %v, want a prefix-not-stable error", err)
	}
}

func TestPromptCompletion_TRL(t *testing.T) {
	q25 := parseFile(t, "qwen25_chat_template.jinja", map[string]string{"eos_token": "<|im_end|>"})
	prompt := []Message{{Role: "user", Content: "3×4는 얼마인가요? 숫자 하나로만 답하세요."}}
	p, c, err := q25.PromptCompletion(prompt, []Message{{Role: "assistant", Content: "12"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantP := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\n3×4는 얼마인가요? 숫자 하나로만 답하세요.<|im_end|>\n<|im_start|>assistant\n"
	if p != wantP || c != "12<|im_end|>\n" {
		t.Errorf("got %q + %q", p, c)
	}
	// Appending EOS again, as TRL #4481 did, must be caught.
	err = CheckDoubledText(p+c+"<|im_end|>", q25.SpecialStrings())
	var de *DoubledError
	if !errors.As(err, &de) || de.Token != "<|im_end|>" {
		t.Errorf("doubled EOS: got %v", err)
	}
}

func TestCheckDoubled(t *testing.T) {
	specials := []string{"<|im_end|>", "<s>"}
	for _, tc := range []struct {
		text string
		bad  bool
	}{
		{"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n", false},
		{"ok<|im_end|><|im_end|>", true},
		{"ok<|im_end|>\n<|im_end|>", true},
		{"ok<|im_end|> x <|im_end|>", false},
		{"<s><s>hello", true},
		{"<s>hello<s>", false},
	} {
		err := CheckDoubledText(tc.text, specials)
		if (err != nil) != tc.bad {
			t.Errorf("CheckDoubledText(%q) = %v, want error %v", tc.text, err, tc.bad)
		}
	}
	enc := toyEncoder{qwenSpecials}
	ids := SpecialIDs(enc, qwenSpecials)
	blank := func(id int) bool { return id > 2000000 }
	for _, tc := range []struct {
		text string
		bad  bool
	}{
		{"hi<|im_end|>\n<|im_start|>assistant\nok<|im_end|>\n", false},
		{"ok<|im_end|>\n<|im_end|>", true},
		{"ok<|im_end|><|im_end|>", true},
		{"<|im_end|>x<|im_end|>", false},
		{"<|im_end|><|im_start|><|im_end|>", false},
	} {
		err := CheckDoubledIDs(enc.Encode(tc.text), ids, blank)
		if (err != nil) != tc.bad {
			t.Errorf("CheckDoubledIDs(%q) = %v, want error %v", tc.text, err, tc.bad)
		}
	}
}
