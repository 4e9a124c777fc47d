package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// qwen25Tokenizer writes Qwen's tokenizer (data/tokenizer/testdata) with Qwen2.5-Instruct's chat
// template (tools, <tool_call> turns, prefix-preserving) into a directory for `init --tokenizer`.
func qwen25Tokenizer(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "data", "tokenizer", "testdata")
	dir := filepath.Join(t.TempDir(), "qwen25-tokenizer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gz, err := os.ReadFile(filepath.Join(src, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "data", "chat", "testdata", "qwen25_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["chat_template"] = string(tmpl)
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json.gz"), gz, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// `grpo --tools calculator` renders the tool's schema into every prompt through the chat template
// and logs TRL 1.x's tool metrics; an unknown tool, a family whose call format is not parsed and a
// template that is not prefix-preserving (Qwen3's) are refused by name before training.
func TestGRPO_ToolsCLI(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := runCLI(t, "init", "--preset", "tiny", "--tokenizer", qwen25Tokenizer(t), "--out", model); err != nil {
		t.Fatal(err)
	}
	data := multData(t, dir, "grpo", "4")
	args := func(out string, extra ...string) []string {
		return append([]string{"grpo", "--model", model, "--dataset", data, "--output-dir", filepath.Join(dir, out), "--max-steps", "1",
			"--num-generations", "2", "--max-completion-length", "8", "--per-device-train-batch-size", "4", "--reward", "mult_correct",
			"--gradient-checkpointing=false"}, extra...)
	}
	if _, err := runCLI(t, args("out", "--tools", "calculator", "--max-tool-calling-iterations", "2")...); err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(filepath.Join(dir, "out", "completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Prompt string `json:"prompt"`
	}
	line, _, _ := strings.Cut(string(c), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil || !strings.Contains(first.Prompt, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"calculator\"") {
		t.Errorf("the prompts do not show the calculator's schema: %.400s", c)
	}
	recs := metricsLines(t, filepath.Join(dir, "out"))
	if _, ok := recs[0].Metrics["tools/call_frequency"]; !ok || len(recs) != 1 {
		t.Errorf("metrics %v: no tools/call_frequency", recs)
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--tools", "search"}, `tools (--tools) no tool "search" (built in: calculator; or FILE.py:FUNC, a dotted module.func)`},
		{[]string{"--tools", "calculator", "--max-tool-calling-iterations", "-1"}, "max_tool_calling_iterations (--max-tool-calling-iterations) must be ≥ 0"},
	} {
		_, err := runCLI(t, args("bad", c.extra...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.extra, err, c.want)
		}
	}
	qwen3 := filepath.Join(dir, "qwen3")
	if _, err := runCLI(t, "init", "--preset", "qwen3-tiny", "--tokenizer", filepath.Join("..", "..", "data", "tokenizer", "testdata"), "--out", qwen3); err != nil {
		t.Fatal(err)
	}
	a := args("bad3", "--tools", "calculator")
	a[2] = qwen3
	if _, err := runCLI(t, a...); err == nil || !strings.Contains(err.Error(), "not prefix-preserving") {
		t.Errorf("Qwen3's template: %v", err)
	}
}
