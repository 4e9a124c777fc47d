package sft_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

const chatRows = `{"messages": [{"role": "user", "content": "2×3?"}, {"role": "assistant", "content": "6"}]}` + "\n"

// baseModel writes a tiny checkpoint like a base model: no chat template, eos_token <|endoftext|>.
func baseModel(t *testing.T) string {
	t.Helper()
	dir := looptest.Model(t)
	path := filepath.Join(dir, "tokenizer_config.json")
	tc := readJSON(t, path)
	delete(tc, "chat_template")
	tc["eos_token"] = "<|endoftext|>"
	raw, err := json.MarshalIndent(tc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeFile writes text into dir/name and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// trainChat trains one step on chatRows with chat_template_path and returns the output directory.
func trainChat(t *testing.T, base, templatePath string) string {
	t.Helper()
	m := looptest.Load(t, base, false)
	cfg := sft.DefaultConfig()
	cfg.ChatTemplatePath = templatePath
	looptest.Common(t, &cfg.Training, 1e-3, 1, 1, 1)
	tr, err := sft.New(m, looptest.Read(t, writeRows(t, "chat.jsonl", chatRows)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := m.Text.Tokenizer.Encode("<|im_start|>user\n2×3?<|im_end|>\n<|im_start|>assistant\n6<|im_end|>\n")
	if got := firstIDs(t, tr, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: ids %v, want ChatML's %v", templatePath, got, want)
	}
	if _, err := loop.Run(context.Background(), m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t)}); err != nil {
		t.Fatal(err)
	}
	return cfg.OutputDir
}

// chat_template_path on a base checkpoint without a template. A .jinja file is the template and
// nothing else changes (TRL sets processing_class.chat_template); a tokenizer directory is TRL's
// clone_chat_template: the template and the source's eos_token (<|im_end|>), which also becomes
// config.json's and generation_config.json's eos_token_id. The output's tokenizer_config.json
// carries the template, so chat.Load (what `posttrain generate --chat` uses) renders with it.
func TestSFT_ChatTemplatePath(t *testing.T) {
	base := baseModel(t)
	if _, err := sft.New(looptest.Load(t, base, false), looptest.Read(t, writeRows(t, "chat.jsonl", chatRows)), sft.DefaultConfig()); err == nil ||
		!strings.Contains(err.Error(), "needs a chat template") {
		t.Fatalf("messages on a base model without chat_template_path: error %v", err)
	}
	jinja := writeFile(t, t.TempDir(), "chatml.jinja", tinymodel.ChatTemplate)
	instruct := looptest.Model(t)
	for _, c := range []struct {
		name, path, eos string
		eosID           any // nil: the base's
	}{
		{".jinja file", jinja, "<|endoftext|>", nil},
		{"tokenizer directory", instruct, "<|im_end|>", float64(tinymodel.IMEnd)},
	} {
		out := trainChat(t, base, c.path)
		tc := readJSON(t, filepath.Join(out, "tokenizer_config.json"))
		if tc["chat_template"] != tinymodel.ChatTemplate || tc["eos_token"] != c.eos {
			t.Errorf("%s: saved chat_template %q, eos_token %v; want the template and %s", c.name, tc["chat_template"], tc["eos_token"], c.eos)
		}
		for _, name := range []string{"config.json", "generation_config.json"} {
			want := c.eosID
			if want == nil {
				want = readJSON(t, filepath.Join(base, name))["eos_token_id"]
			}
			if got := readJSON(t, filepath.Join(out, name))["eos_token_id"]; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: %s eos_token_id %v, want %v", c.name, name, got, want)
			}
		}
		tpl, err := chat.Load(out)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := tpl.Render([]chat.Message{{Role: "user", Content: "hi"}}, chat.Options{AddGenerationPrompt: true})
		if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"; err != nil || got != want {
			t.Errorf("%s: output renders %q (err %v), want %q", c.name, got, err, want)
		}
	}
}

// Templates needing tokens the vocabulary lacks are refused naming them and the option (TRL would
// add them and resize the embeddings), as are paths that are neither a template nor a directory.
func TestSFT_ChatTemplatePathErrors(t *testing.T) {
	m := looptest.Load(t, baseModel(t), false)
	dir := t.TempDir()
	llama := writeFile(t, dir, "llama.jinja", "{% for m in messages %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{% endfor %}")
	src := filepath.Join(dir, "llama-tokenizer")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, src, "tokenizer_config.json", `{"chat_template": "{{ messages[0].content }}", "eos_token": "<|eot_id|>",
  "added_tokens_decoder": {"128000": {"content": "<|begin_of_text|>", "special": true}, "128009": {"content": "<|eot_id|>", "special": true}}}`)
	rows := looptest.Read(t, writeRows(t, "chat.jsonl", chatRows))
	for _, c := range []struct{ path, want string }{
		{llama, "the template needs <|start_header_id|> <|end_header_id|> <|eot_id|>, which the vocabulary of"},
		{src, "the template needs <|begin_of_text|> <|eot_id|>, which the vocabulary of"},
		{writeFile(t, dir, "template.txt", "x"), "want a .jinja or .j2 template file or a tokenizer directory"},
		{filepath.Join(dir, "missing.jinja"), "no such file"},
	} {
		cfg := sft.DefaultConfig()
		cfg.ChatTemplatePath = c.path
		_, err := sft.New(m, rows, cfg)
		if err == nil || !strings.Contains(err.Error(), "chat_template_path") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one naming chat_template_path and %q", c.path, err, c.want)
		}
	}
}

// A checkpoint whose template is a chat_template.jinja (which takes precedence over
// tokenizer_config.json's) is saved with the new template only: the copied .jinja is dropped.
func TestSFT_ChatTemplatePathReplacesJinja(t *testing.T) {
	dir := looptest.Model(t)
	writeFile(t, dir, "chat_template.jinja", "{{ 'old' }}")
	m := looptest.Load(t, dir, false)
	if err := m.Text.SetChatTemplate(writeFile(t, t.TempDir(), "chatml.jinja", tinymodel.ChatTemplate)); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := m.Save(out); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(out, "chat_template.jinja")); !os.IsNotExist(err) {
		t.Errorf("output chat_template.jinja: %v, want it absent", err)
	}
	if tpl, err := chat.Load(out); err != nil || tpl.Source != tinymodel.ChatTemplate {
		t.Errorf("output template: %v, err %v", tpl, err)
	}
}
