package chat

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// Bounds of one fuzz iteration: the template source and the conversation JSON.
const (
	maxFuzzTemplate = 8 << 10
	maxFuzzConv     = 4 << 10
	// renderTimeout is how long one parse + render may take before the input is reported as a
	// hang (generous: fuzz workers share a small, busy machine).
	renderTimeout = 10 * time.Second
)

// fuzzConv is one fuzzed rendering request: the messages and tools apply_chat_template gets.
type fuzzConv struct {
	Messages []Message         `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

// FuzzRender checks that no template source and conversation make Parse or Render panic or
// hang: each gives an error or a rendering. Seeds: the Qwen2.5 and Qwen3 chat templates and the
// feature templates of jinja_golden.json, with the conversations of convs.json and
// convs_tools.json.
func FuzzRender(f *testing.F) {
	var templates []string
	for _, name := range []string{"testdata/qwen25_chat_template.jinja", "testdata/qwen3_chat_template.jinja"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		templates = append(templates, string(b))
	}
	var golden map[string]json.RawMessage
	readJSONFile(f, "testdata/jinja_golden.json", &golden)
	for _, key := range []string{"features_template", "features2_template"} {
		var src string
		if err := json.Unmarshal(golden[key], &src); err != nil {
			f.Fatal(err)
		}
		templates = append(templates, src)
	}
	var convs []json.RawMessage
	for _, name := range []string{"testdata/convs.json", "testdata/convs_tools.json"} {
		var list []json.RawMessage
		readJSONFile(f, name, &list)
		convs = append(convs, list[0], list[len(list)-1])
	}
	for _, src := range templates {
		for i, c := range convs {
			f.Add(src, []byte(c), i%2 == 0)
		}
	}
	f.Add(`{% for m in messages %}{{ m.content * 3 }}{% endfor %}`, []byte(`{"messages":[{"role":"user","content":"a"}]}`), true)
	// A macro without a base case overflowed the goroutine stack inside gonja (a fatal error) before
	// Render bounded macro nesting: testdata/fuzz/FuzzRender/recursive-macro.
	f.Add(`{% macro f(n) %}{{ f(n) ~ f(n) }}{% endmacro %}{{ f(1) }}`, []byte(`{"messages":[]}`), false)
	f.Add(`{% for i in range(1000000000000) %}x{% endfor %}`, []byte(`{"messages":[]}`), false)
	f.Add(`{% macro f(n) %}{{ n }}{% endmacro %}{{ f(1) }}{{ f(f(2)) }}`, []byte(`{"messages":[]}`), false)
	f.Add(`{{ raise_exception('no') }}`, []byte(`{"messages":[{"role":"tool","content":null}]}`), false)
	f.Add(`{{ messages[5].content }}{{ tools[0] | tojson }}`, []byte(`{"messages":[{"role":"user"}],"tools":[{}]}`), true)
	f.Add(`{%`, []byte(`[]`), false)
	f.Fuzz(func(t *testing.T, src string, conv []byte, addGen bool) {
		if len(src) > maxFuzzTemplate || len(conv) > maxFuzzConv {
			return
		}
		var c fuzzConv
		if json.Unmarshal(conv, &c) != nil {
			c = fuzzConv{Messages: []Message{{Role: "user", Content: string(conv)}}}
		}
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			tpl, err := Parse(src, map[string]string{"eos_token": "<|im_end|>", "bos_token": "<s>"})
			if err != nil {
				done <- result{err: err}
				return
			}
			out, err := tpl.Render(c.Messages, Options{AddGenerationPrompt: addGen, Tools: c.Tools, Vars: map[string]any{"enable_thinking": addGen}})
			done <- result{out, err}
		}()
		select {
		case r := <-done:
			if r.err != nil && r.out != "" {
				t.Fatalf("Render returned output %q with error %v", r.out, r.err)
			}
		case <-time.After(renderTimeout):
			t.Fatalf("parse + render did not finish in %v\ntemplate: %q\nconversation: %q", renderTimeout, src, conv)
		}
	})
}

func readJSONFile(f *testing.F, path string, v any) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		f.Fatalf("%s: %v", path, err)
	}
}

// TestParse_GonjaPanicIsError: gonja's parser dereferences nil on an `is` without a test name;
// Parse gives an error instead of taking the process down (found by FuzzRender).
func TestParse_GonjaPanicIsError(t *testing.T) {
	_, err := Parse(`{% if x is %}{% endif %}`, nil)
	if err == nil || !strings.Contains(err.Error(), "parse chat template: malformed template") {
		t.Fatalf("got %v, want a malformed-template error", err)
	}
}
