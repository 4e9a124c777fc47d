package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// `posttrain sft --chat-template-path FILE.jinja` on a checkpoint without a chat template trains on
// messages rows, and `posttrain generate --chat` on the output renders with that template.
func TestSFTCommand_ChatTemplatePath(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	cfgPath := filepath.Join(model, "tokenizer_config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var tc map[string]any
	if err := json.Unmarshal(raw, &tc); err != nil {
		t.Fatal(err)
	}
	delete(tc, "chat_template")
	if raw, err = json.Marshal(tc); err != nil {
		t.Fatal(err)
	}
	jinja, rows := filepath.Join(dir, "chatml.jinja"), filepath.Join(dir, "chat.jsonl")
	for path, text := range map[string]string{cfgPath: string(raw), jinja: tinymodel.ChatTemplate,
		rows: `{"messages": [{"role": "user", "content": "2×3?"}, {"role": "assistant", "content": "6"}]}` + "\n"} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, "out")
	args := []string{"sft", "--model", model, "--dataset", rows, "--output-dir", out, "--max-steps", "1"}
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "needs a chat template") {
		t.Fatalf("without --chat-template-path: error %v, want one saying the data needs a chat template", err)
	}
	if _, err := runCLI(t, append(args, "--chat-template-path", jinja)...); err != nil {
		t.Fatal(err)
	}
	got := runGenerateJSON(t, "--model", out, "--chat", "--prompt", "hi", "--max-new-tokens", "1")
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"; got.Prompt != want {
		t.Errorf("generate --chat on the output rendered %q, want %q", got.Prompt, want)
	}
}

// `posttrain sft --dataset-text-field content` reads the training and eval rows from that column;
// with the default it refuses them, naming the field.
func TestSFTCommand_DatasetTextField(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	rows := filepath.Join(dir, "content.jsonl")
	if err := os.WriteFile(rows, []byte(`{"content": "2×3=6"}`+"\n"+`{"content": "4×5=20"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"sft", "--model", model, "--dataset", rows, "--output-dir", filepath.Join(dir, "out"), "--max-steps", "1"}
	if _, err := runCLI(t, args...); err == nil || !strings.Contains(err.Error(), "text") {
		t.Fatalf("default dataset_text_field on a content column: error %v, want one naming the text field", err)
	}
	out, err := runCLI(t, append(args, "--dataset-text-field", "content", "--eval-dataset", rows, "--eval-strategy", "steps", "--eval-steps", "1")...)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(dir, "out", runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Metrics["eval_loss"] <= 0 {
		t.Errorf("want a train and an eval line, got %v (%s)", recs, out)
	}
}
