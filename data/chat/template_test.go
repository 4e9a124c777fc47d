package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/data/tokenizer"
)

type conv struct {
	Name     string            `json:"name"`
	Messages []Message         `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

type rendered struct {
	Name     string `json:"name"`
	Rendered string `json:"rendered"`
	IDs      []int  `json:"ids"` // apply_chat_template(tokenize=True)
	// RenderedNoGen and IDsNoGen are the same with add_generation_prompt=False.
	RenderedNoGen string `json:"rendered_no_generation_prompt"`
	IDsNoGen      []int  `json:"ids_no_generation_prompt"`
}

func readJSON(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func parseFile(t *testing.T, name string, special map[string]string) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := Parse(string(src), special)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestRender_MatchesHF renders every fixture conversation with both templates, with and without
// the generation prompt, and compares with transformers' apply_chat_template (text, and the ids of
// tokenize=True, which the rendered text's Encode must give: Qwen2.5's tokenizer lacks Qwen3's
// added tokens 151665-151668).
func TestRender_MatchesHF(t *testing.T) {
	special := map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
	qwen3, err := tokenizer.Load("../tokenizer/testdata/tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	qwen25, err := qwen3.WithoutAddedTokens(151665, 151666, 151667, 151668)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		template, convs, want string
		tok                   *tokenizer.BPE
	}{
		{"qwen25_chat_template.jinja", "convs.json", "hf_qwen25.json", qwen25},
		{"qwen25_chat_template.jinja", "convs_tools.json", "hf_qwen25_tools.json", qwen25},
		{"qwen3_chat_template.jinja", "convs.json", "hf_qwen3.json", qwen3},
		{"qwen3_chat_template.jinja", "convs_tools.json", "hf_qwen3_tools.json", qwen3},
	} {
		tpl := parseFile(t, tc.template, special)
		var convs []conv
		var want []rendered
		readJSON(t, tc.convs, &convs)
		readJSON(t, tc.want, &want)
		if len(convs) != len(want) || len(convs) == 0 {
			t.Fatalf("%s: %d conversations, %d expected renders", tc.convs, len(convs), len(want))
		}
		for i, c := range convs {
			if want[i].Name != c.Name {
				t.Fatalf("fixture order: %s vs %s", want[i].Name, c.Name)
			}
			for _, gen := range []bool{true, false} {
				wantText, wantIDs := want[i].Rendered, want[i].IDs
				if !gen {
					wantText, wantIDs = want[i].RenderedNoGen, want[i].IDsNoGen
				}
				got, err := tpl.Render(c.Messages, Options{AddGenerationPrompt: gen, Tools: c.Tools})
				if err != nil {
					t.Fatalf("%s/%s: %v", tc.template, c.Name, err)
				}
				if got != wantText {
					t.Errorf("%s/%s (generation prompt %v):\n got %q\nwant %q", tc.template, c.Name, gen, got, wantText)
				}
				if ids := tc.tok.Encode(got); !slices.Equal(ids, wantIDs) || len(wantIDs) == 0 {
					t.Errorf("%s/%s (generation prompt %v): ids\n got %v\nwant %v", tc.template, c.Name, gen, ids, wantIDs)
				}
			}
		}
	}
}

type goldenCase struct {
	Template string            `json:"template"`
	Name     string            `json:"name"`
	Messages []Message         `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Gen      *bool             `json:"gen"`
	Vars     map[string]any    `json:"vars"`
	Special  map[string]string `json:"special"`
	Rendered *string           `json:"rendered"`
	Error    *string           `json:"error"`
}

// TestRender_JinjaGolden checks edge cases (think blocks, reasoning_content, multi-step tool calls,
// string vs object arguments, floats and escapes in tojson, enable_thinking, raise_exception,
// loop variables, string methods, namespace, ordered dict methods) against Python jinja2 run in
// transformers' chat-template environment (testdata/gen_golden.py).
func TestRender_JinjaGolden(t *testing.T) {
	var g struct {
		Features  string       `json:"features_template"`
		Features2 string       `json:"features2_template"`
		Cases     []goldenCase `json:"cases"`
	}
	readJSON(t, "jinja_golden.json", &g)
	qwenSpecial := map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
	templates := map[string]*Template{
		"qwen25_chat_template.jinja": parseFile(t, "qwen25_chat_template.jinja", qwenSpecial),
		"qwen3_chat_template.jinja":  parseFile(t, "qwen3_chat_template.jinja", qwenSpecial),
	}
	if len(g.Cases) < 10 {
		t.Fatalf("only %d golden cases", len(g.Cases))
	}
	for _, c := range g.Cases {
		tpl := templates[c.Template]
		if src, ok := map[string]string{"features": g.Features, "features2": g.Features2}[c.Template]; ok {
			var err error
			if tpl, err = Parse(src, c.Special); err != nil {
				t.Fatalf("%s: %v", c.Template, err)
			}
		}
		opt := Options{AddGenerationPrompt: c.Gen == nil || *c.Gen, Tools: c.Tools, Vars: c.Vars}
		got, err := tpl.Render(c.Messages, opt)
		switch {
		case c.Error != nil:
			var te *TemplateError
			if !errors.As(err, &te) || te.Msg != *c.Error {
				t.Errorf("%s/%s: got error %v, want TemplateError %q", c.Template, c.Name, err, *c.Error)
			}
		case err != nil:
			t.Errorf("%s/%s: %v", c.Template, c.Name, err)
		case got != *c.Rendered:
			t.Errorf("%s/%s:\n got %q\nwant %q", c.Template, c.Name, got, *c.Rendered)
		}
	}
}

func TestLoad_TokenizerConfig(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("testdata", "qwen3_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"testdata/tokenizer_config.json", "testdata"} {
		tpl, err := Load(path)
		if err != nil {
			t.Fatalf("Load(%s): %v", path, err)
		}
		if tpl.Source != string(want) {
			t.Errorf("Load(%s): template differs from qwen3_chat_template.jinja", path)
		}
		// bos_token is null in the config: undefined for the template, as in transformers.
		wantSpecial := map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
		if len(tpl.Special) != len(wantSpecial) || tpl.Special["eos_token"] != "<|im_end|>" || tpl.Special["pad_token"] != "<|endoftext|>" {
			t.Errorf("Load(%s): special tokens %v, want %v", path, tpl.Special, wantSpecial)
		}
		if len(tpl.Additional) != 13 || tpl.Additional[0] != "<|im_start|>" {
			t.Errorf("Load(%s): additional_special_tokens %v", path, tpl.Additional)
		}
	}
	if _, err := Load("testdata/convs.json"); err == nil {
		t.Error("Load of a file without chat_template: want an error")
	}
}

func TestParse_Errors(t *testing.T) {
	if _, err := Parse("{% for m in messages %}", nil); err == nil {
		t.Error("unclosed for: want a parse error")
	}
	tpl, err := Parse("{{ nosuchfunction(messages) }}", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tpl.Render([]Message{{Role: "user", Content: "x"}}, Options{}); err == nil {
		t.Error("call of an undefined function: want a render error")
	}
}

func TestLoad_ChatTemplateJinjaWins(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"chat_template": "from config", "eos_token": {"content": "<|im_end|>", "special": true}, "bos_token": null}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	tpl, err := Load(filepath.Join(dir, "tokenizer.json")) // a tokenizer.json path finds its config
	if err != nil {
		t.Fatal(err)
	}
	if tpl.Source != "from config" || tpl.Special["eos_token"] != "<|im_end|>" {
		t.Errorf("got %q, special %v", tpl.Source, tpl.Special)
	}
	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{{ eos_token }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if tpl, err = Load(dir); err != nil || tpl.Source != "{{ eos_token }}" {
		t.Fatalf("chat_template.jinja: %v %+v", err, tpl)
	}
	if got, _ := tpl.Render(nil, Options{}); got != "<|im_end|>" {
		t.Errorf("render = %q", got)
	}
}

// A training template's {% generation %} block renders its body (transformers' AssistantTracker).
func TestRender_GenerationTag(t *testing.T) {
	tpl, err := Parse("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% set x = 1 %}{% endgeneration %}{% else %}[{{ m.content }}]{% endif %}{% endfor %}", nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tpl.Render([]Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}, Options{})
	if err != nil || got != "[q]a" {
		t.Errorf("got %q, %v", got, err)
	}
}
