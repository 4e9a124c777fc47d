package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const chatTestdata = "../../data/chat/testdata"

type renderFixture struct {
	Name     string            `json:"name"`
	Messages json.RawMessage   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
	Rendered string            `json:"rendered"`
}

func readRenderFixtures(t *testing.T, name string) []renderFixture {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chatTestdata, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []renderFixture
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// qwen25Config writes a tokenizer_config.json holding Qwen2.5-Instruct's template.
func qwen25Config(t *testing.T, dir string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(chatTestdata, "qwen25_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"chat_template": string(src), "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": nil})
	path := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRender_HFFixtures(t *testing.T) {
	dir := t.TempDir()
	q25 := qwen25Config(t, dir)
	for _, tc := range []struct{ tokenizer, convs, want string }{
		{q25, "convs.json", "hf_qwen25.json"},
		{q25, "convs_tools.json", "hf_qwen25_tools.json"},
		{chatTestdata, "convs.json", "hf_qwen3.json"},                                        // a model directory
		{chatTestdata + "/tokenizer_config.json", "convs_tools.json", "hf_qwen3_tools.json"}, // the file
	} {
		convs, want := readRenderFixtures(t, tc.convs), readRenderFixtures(t, tc.want)
		for i, c := range convs {
			msgs := filepath.Join(dir, "messages.json")
			os.WriteFile(msgs, c.Messages, 0o644)
			args := []string{"render", "--tokenizer", tc.tokenizer, "--messages", msgs, "--add-generation-prompt"}
			if c.Tools != nil {
				tools, _ := json.Marshal(c.Tools)
				os.WriteFile(filepath.Join(dir, "tools.json"), tools, 0o644)
				args = append(args, "--tools", filepath.Join(dir, "tools.json"))
			}
			got, err := runCLI(t, args...)
			if err != nil {
				t.Fatalf("%s/%s: %v", tc.want, c.Name, err)
			}
			if got != want[i].Rendered {
				t.Errorf("%s/%s:\n got %q\nwant %q", tc.want, c.Name, got, want[i].Rendered)
			}
		}
	}
}

func TestRender_VarsSpansAndErrors(t *testing.T) {
	dir := t.TempDir()
	msgs := filepath.Join(dir, "m.json")
	os.WriteFile(msgs, []byte(`{"messages": [{"role": "user", "content": "3×4?"}, {"role": "assistant", "content": "12"}]}`), 0o644)
	got, err := runCLI(t, "render", "--tokenizer", chatTestdata, "--messages", msgs, "--var", "enable_thinking=false", "--add-generation-prompt")
	if err != nil || !strings.HasSuffix(got, "<|im_start|>assistant\n<think>\n\n</think>\n\n") {
		t.Errorf("enable_thinking=false: %v %q", err, got)
	}
	// A JSON value with commas is one variable (it was split at the commas into bad KEY=JSON pairs).
	withObject, err := runCLI(t, "render", "--tokenizer", chatTestdata, "--messages", msgs, "--var", "enable_thinking=false",
		"--var", `extra={"a": 1, "b": [2, 3]}`, "--add-generation-prompt")
	if err != nil || withObject != got {
		t.Errorf("a JSON object with commas in --var: %v %q", err, withObject)
	}
	got, err = runCLI(t, "render", "--tokenizer", chatTestdata, "--messages", msgs, "--spans")
	var out struct {
		Text  string
		Spans []struct {
			Message    int
			Start, End int
			Text       string
		}
	}
	if err != nil || json.Unmarshal([]byte(got), &out) != nil || len(out.Spans) != 1 ||
		out.Spans[0].Text != "<think>\n\n</think>\n\n12<|im_end|>" || out.Text[out.Spans[0].Start:out.Spans[0].End] != out.Spans[0].Text {
		t.Errorf("--spans: %v %s", err, got)
	}
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`[{"role": "robot", "content": "x"}]`), 0o644)
	os.WriteFile(filepath.Join(dir, "empty.json"), []byte(`[]`), 0o644)
	for _, args := range [][]string{
		{"render", "--tokenizer", chatTestdata, "--messages", filepath.Join(dir, "bad.json")},
		{"render", "--tokenizer", chatTestdata, "--messages", filepath.Join(dir, "empty.json")},
		{"render", "--tokenizer", chatTestdata, "--messages", filepath.Join(dir, "missing.json")},
		{"render", "--tokenizer", dir, "--messages", msgs},
		{"render", "--tokenizer", chatTestdata, "--messages", msgs, "--var", "enable_thinking"},
		{"render", "--tokenizer", chatTestdata, "--messages", msgs, "--tools", msgs},
		{"render", "--messages", msgs},
	} {
		if _, err := runCLI(t, args...); err == nil {
			t.Errorf("%v: want an error", args)
		}
	}
}
