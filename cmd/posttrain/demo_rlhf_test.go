package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/apps/demo"
)

// The flags of one demo are refused by the other, and those of the demo's own model with --model,
// each in one line naming the flag.
func TestDemo_RLHFFlagsBelongToTheirDemo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--rm-steps", "3"}, "--rm-steps is a flag of the RLHF demo: add --rlhf"},
		{[]string{"demo", "--ppo-updates", "3"}, "--ppo-updates is a flag of the RLHF demo: add --rlhf"},
		{[]string{"demo", "--rlhf", "--reward", "mult_correct"}, "--reward is not a flag of the RLHF demo"},
		{[]string{"demo", "--rlhf", "--grpo-seeds", "2"}, "--grpo-seeds is not a flag of the RLHF demo"},
		{[]string{"demo", "--model", "m", "--rlhf"}, "--model is for the GRPO demo: the RLHF demo trains its own model (drop --rlhf)"},
		{[]string{"demo", "--model", "m", "--sft-steps", "3"}, "--sft-steps shapes the demo's own model: with --model there is no tokenizer, init or SFT stage"},
		{[]string{"demo", "--model", "m", "--hidden-size", "8"}, "--hidden-size shapes the demo's own model: with --model there is no tokenizer, init or SFT stage"},
		{[]string{"demo", "--rlhf", "--prompt", "What is {a}×{b}?"}, "--prompt is for the GRPO demo"},
		{[]string{"demo", "--prompt", "What is {a} squared?"}, "--prompt: the prompt template must contain {a} and {b}, got \"What is {a} squared?\""},
	} {
		rc, stderr := runFiles(t, c.args...)
		if rc != 2 || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", c.args, rc, stderr)
		}
	}
}

// A miniature `posttrain demo --rlhf` prints the reward model's ranking and one row per stage.
func TestDemo_RLHFMiniature(t *testing.T) {
	dir := t.TempDir()
	rc, stdout, stderr := runFilesOut(t, "demo", "--rlhf", "--output-dir", filepath.Join(dir, "demo"), "--max-factor", "4", "--held-out", "3",
		"--hidden-size", "16", "--intermediate-size", "32", "--layers", "1", "--sft-steps", "3", "--sft-batch", "4",
		"--grpo-steps", "2", "--grpo-prompts", "2", "--num-generations", "4", "--rm-steps", "3", "--rm-batch", "4",
		"--ppo-updates", "2", "--ppo-prompts", "4", "--ppo-epochs", "2")
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 9 {
		t.Fatalf("%d lines, want 9 (reward model, header, 5 stages, legend, total):\n%s", len(lines), stdout)
	}
	if !strings.HasPrefix(lines[0], "reward model (") || !strings.Contains(lines[0], "/24)") || !strings.Contains(lines[0], "/8)") {
		t.Errorf("reward model line %q (want its 24 training and 8 held-out pairs)", lines[0])
	}
	for i, name := range []string{"init (random weights)", "SFT", "GRPO reward model", "PPO reward model", "GRPO random (control)"} {
		row := lines[2+i]
		if !strings.HasPrefix(row, name) || strings.Count(row, "/6)") != 2 || strings.Count(row, "/3)") != 2 {
			t.Errorf("row %d %q, want %s on 6 GRPO and 3 held-out problems", i, row, name)
		}
		if rl := i >= 2; rl == strings.Contains(row, "  -  ") {
			t.Errorf("row %q: a reward only for the RL stages", row)
		}
	}
}

// A miniature `posttrain demo --model M --prompt T --reward mult_last` prints the pretrained row
// and the two GRPO rows, each with the three verifiers on both problem sets.
func TestDemo_PretrainedMiniature(t *testing.T) {
	dir := t.TempDir()
	model, err := demo.WriteBase(filepath.Join(dir, "pre"), demo.ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}, 5)
	if err != nil {
		t.Fatal(err)
	}
	rc, stdout, stderr := runFilesOut(t, "demo", "--model", model, "--output-dir", filepath.Join(dir, "demo"), "--max-factor", "4", "--held-out", "3",
		"--grpo-steps", "2", "--grpo-prompts", "2", "--num-generations", "4", "--max-completion-length", "3",
		"--reward", "mult_last", "--prompt", "What is {a}×{b}?")
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 6 || strings.Count(lines[0], " last ") != 2 {
		t.Fatalf("%d lines, want 6 (header with the last columns, 3 stages, legend, total):\n%s", len(lines), stdout)
	}
	for i, name := range []string{"pretrained", "GRPO mult_last", "GRPO random (control)"} {
		row := lines[1+i]
		if !strings.HasPrefix(row, name) || strings.Count(row, "/6)") != 3 || strings.Count(row, "/3)") != 3 {
			t.Errorf("row %d %q, want %s with three verifiers on 6 GRPO and 3 held-out problems", i, row, name)
		}
		if trained := i > 0; trained == strings.HasSuffix(row, "  -") {
			t.Errorf("row %q: a wall time only for the trained stages", row)
		}
	}
	rows, err := os.ReadFile(filepath.Join(dir, "demo", "prompts", "grpo.jsonl"))
	if err != nil || !strings.Contains(string(rows), `"content":"What is `) {
		t.Errorf("prompts/grpo.jsonl: %v\n%s", err, rows)
	}
}
