package gguf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/tinymodel"
)

// renderOllama renders an ollama TEMPLATE as ollama does: a Go text/template over .Messages.
func renderOllama(t *testing.T, src string, msgs []chat.Message) string {
	t.Helper()
	tpl, err := template.New("ollama").Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	type msg struct{ Role, Content string }
	data := struct{ Messages []msg }{}
	for _, m := range msgs {
		data.Messages = append(data.Messages, msg{m.Role, m.Content})
	}
	var b strings.Builder
	if err := tpl.Execute(&b, data); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// The Modelfile's TEMPLATE renders what the model's own chat template renders (HF's Jinja, with
// add_generation_prompt after a user turn, without it after an assistant turn, whose end-of-turn
// the ollama form leaves open for continuation): the tiny Qwen ChatML template, Llama 3's and
// Gemma 3's (data/tokenizer/testdata), on conversations of one to three turns without a system
// message (Gemma's template folds one into the first user turn, ollama's own gemma3 template and
// this one give it a turn of its own). The bos token a Jinja template writes first is ollama's to
// add (add_bos_token), so it is dropped before comparing. An unknown template gets no TEMPLATE.
func TestExport_ModelfileRendersLikeJinja(t *testing.T) {
	read := func(path string) (tmpl, bos string) {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var tc struct {
			ChatTemplate string `json:"chat_template"`
			BOS          any    `json:"bos_token"`
		}
		if err := json.Unmarshal(raw, &tc); err != nil {
			t.Fatal(err)
		}
		return tc.ChatTemplate, tokenName(tc.BOS)
	}
	llama3, llamaBOS := read(filepath.Join("..", "..", "data", "tokenizer", "testdata", "llama3", "tokenizer_config.json"))
	gemma3, gemmaBOS := read(filepath.Join("..", "..", "data", "tokenizer", "testdata", "gemma3", "tokenizer_config.json"))
	convs := [][]chat.Message{
		{{Role: "user", Content: "What is 2+2?"}},
		{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello! How can I help?"}, {Role: "user", Content: "Name a colour.\nJust one."}},
	}
	for _, c := range []struct{ name, tmpl, bos, family string }{
		{"tinymodel ChatML", tinymodel.ChatTemplate, "", "ChatML (Qwen, SmolLM2)"},
		{"Llama 3", llama3, llamaBOS, "Llama 3"},
		{"Gemma 3", gemma3, gemmaBOS, "Gemma"},
	} {
		o := findOllamaTemplate(c.tmpl)
		if o == nil || o.family != c.family {
			t.Fatalf("%s: found %v, want %s", c.name, o, c.family)
		}
		jinja, err := chat.Parse(c.tmpl, map[string]string{"bos_token": c.bos, "eos_token": ""})
		if err != nil {
			t.Fatal(err)
		}
		for _, msgs := range convs {
			want, err := jinja.Render(msgs, chat.Options{AddGenerationPrompt: true})
			if err != nil {
				t.Fatal(err)
			}
			want = strings.TrimPrefix(want, c.bos)
			if got := renderOllama(t, o.text, msgs); got != want {
				t.Errorf("%s, %d messages: ollama renders\n%q\nJinja\n%q", c.name, len(msgs), got, want)
			}
		}
	}
	text, family, known := Modelfile("m.gguf", &Exported{Template: "{{ messages }}", Stops: []string{"</s>"}})
	if known || family != "" || strings.Contains(text, "TEMPLATE") || text != "FROM ./m.gguf\nPARAMETER stop \"</s>\"\n" {
		t.Errorf("unknown template: %q (known %v)", text, known)
	}
}
