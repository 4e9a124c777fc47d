package demo

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/backend"
)

func TestNewSplit_DisjointAndSeeded(t *testing.T) {
	a, err := NewSplit(12, 40, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.HeldOut) != 40 || len(a.Train) != 121-40 {
		t.Fatalf("split %d/%d, want 40/81", len(a.HeldOut), len(a.Train))
	}
	seen := map[mult.Problem]bool{}
	for _, p := range a.Train {
		seen[p] = true
	}
	for _, p := range a.HeldOut {
		if seen[p] {
			t.Errorf("%v is both held out and trained on", p)
		}
	}
	b, _ := NewSplit(12, 40, 1)
	c, _ := NewSplit(12, 40, 2)
	if a.HeldOut[0] != b.HeldOut[0] || a.HeldOut[5] != b.HeldOut[5] {
		t.Error("the same seed gave a different split")
	}
	if a.HeldOut[0] == c.HeldOut[0] && a.HeldOut[1] == c.HeldOut[1] && a.HeldOut[2] == c.HeldOut[2] {
		t.Error("another seed gave the same split")
	}
	if _, err := NewSplit(12, 121, 1); err == nil {
		t.Error("holding out every problem must be an error")
	}
}

// A miniature demo runs every stage end to end (tokenizer, init, SFT, GRPO, control) and leaves
// HF checkpoints with metrics.jsonl; the learning itself is measured by `posttrain demo`.
func TestRun_Miniature(t *testing.T) {
	o := miniature(t, Default)
	rep, err := Run(stdctx.Background(), o, Env{Backend: backend.MustNewForTests()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.Stages {
		names = append(names, s.Name)
		if s.HeldOut.Strict.N != 3 || s.Train.Strict.N != 6 || s.HeldOut.Correct.N != 3 || s.Train.Correct.N != 6 {
			t.Errorf("%s evaluated on %+v/%+v problems, want 3 held out and 6 trained", s.Name, s.HeldOut, s.Train)
		}
		if s.HeldOut.Strict.Correct > s.HeldOut.Correct.Correct || s.Train.Strict.Correct > s.Train.Correct.Correct {
			t.Errorf("%s: more strict than correct answers: %+v %+v", s.Name, s.HeldOut, s.Train)
		}
	}
	if got := strings.Join(names, "|"); got != "init (random weights)|SFT|GRPO mult_strict|GRPO random (control)" {
		t.Errorf("stages %s", got)
	}
	for _, f := range []string{"tokenizer/tokenizer.json", "base/config.json", "sft/model.safetensors", "grpo/metrics.jsonl",
		"grpo/completions.jsonl", "grpo/model.safetensors", "grpo-random/metrics.jsonl"} {
		if _, err := os.Stat(filepath.Join(o.OutputDir, f)); err != nil {
			t.Error(err)
		}
	}
	// A second demo into the same directory replaces the GRPO runs (their directories hold a run).
	o.ReuseSFT = true
	if _, err := Run(stdctx.Background(), o, Env{Backend: backend.MustNewForTests()}); err != nil {
		t.Fatalf("rerun: %v", err)
	}
}

// With Model set the demo starts from that checkpoint: it is evaluated as it is (the
// "pretrained" row), both GRPO runs start from it, and no tokenizer, init or SFT stage runs.
func TestRun_PretrainedModel(t *testing.T) {
	o := miniature(t, Default)
	base, err := WriteBase(t.TempDir(), o.Shape, 5)
	if err != nil {
		t.Fatal(err)
	}
	o.Model, o.MaxCompletionLength, o.Reward = base, 3, "mult_last"
	o.Prompt = "What is {a}×{b}? Reply with the number only."
	rep, err := Run(stdctx.Background(), o, Env{Backend: backend.MustNewForTests()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.Stages {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, "|"); got != "pretrained|GRPO mult_last|GRPO random (control)" {
		t.Errorf("stages %s", got)
	}
	if rep.Stages[0].Dir != base {
		t.Errorf("the pretrained row evaluated %s, want %s", rep.Stages[0].Dir, base)
	}
	for _, f := range []string{"tokenizer", "base", "sft"} {
		if _, err := os.Stat(filepath.Join(o.OutputDir, f)); !os.IsNotExist(err) {
			t.Errorf("%s: %v, want no such stage with a pretrained model", f, err)
		}
	}
	for _, f := range []string{"grpo/model.safetensors", "grpo-random/model.safetensors", "prompts/grpo.jsonl", "prompts/held-out.jsonl"} {
		if _, err := os.Stat(filepath.Join(o.OutputDir, f)); err != nil {
			t.Error(err)
		}
	}
	lines, err := os.ReadFile(filepath.Join(o.OutputDir, "grpo", "training_args.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"model_name_or_path: " + base, "max_completion_length: 3", "- mult_last"} {
		if !strings.Contains(string(lines), want) {
			t.Errorf("grpo/training_args.yaml has no %q:\n%s", want, lines)
		}
	}
	// GRPO sampled the template's question as a single user turn: the model's chat template put
	// its own default system prompt (Qwen2.5's here), not the demo's "calc".
	c, err := os.ReadFile(filepath.Join(o.OutputDir, "grpo", "completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	first := strings.SplitN(string(c), "\n", 2)[0]
	if !strings.Contains(first, "? Reply with the number only.") || !strings.Contains(first, "You are Qwen") || strings.Contains(first, "calc") {
		t.Errorf("completions.jsonl's first sample was not prompted with the template alone: %s", first)
	}
	rows, err := os.ReadFile(filepath.Join(o.OutputDir, "prompts", "held-out.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(rows), "\n"); n != o.HeldOut || !strings.Contains(string(rows), `[{"role":"user","content":"What is `) || !strings.Contains(string(rows), `"answer":"`) {
		t.Errorf("prompts/held-out.jsonl (%d rows, want %d conversational rows of the template with their answer):\n%s", n, o.HeldOut, rows)
	}
	if rep.Stages[0].Wall != 0 || rep.Stages[1].Wall == 0 {
		t.Errorf("walls %v, %v: want none for the pretrained row and the training time for GRPO's", rep.Stages[0].Wall, rep.Stages[1].Wall)
	}
}

// Each verifier reward scores its own field of Scores; an unknown reward is refused by name.
func TestVerifiers_Table(t *testing.T) {
	s := Scores{Strict: Accuracy{Correct: 1}, Correct: Accuracy{Correct: 2}, Last: Accuracy{Correct: 3}}
	for reward, want := range map[string]int{"mult_strict": 1, "mult_correct": 2, "mult_last": 3} {
		if err := checkVerifier(reward); err != nil {
			t.Error(err)
		}
		if got := s.Of(reward).Correct; got != want {
			t.Errorf("Of(%s) = %d, want %d", reward, got, want)
		}
	}
	if err := checkVerifier("random"); err == nil || !strings.Contains(err.Error(), `mult_strict, mult_correct, mult_last, got "random"`) {
		t.Errorf("checkVerifier(random) = %v", err)
	}
}

// Prompter: the demo's own model gets "calc" and the course's question; a pretrained model a single
// user turn; a template replaces the question for either (and for SFT's rows too).
func TestPrompter(t *testing.T) {
	p := mult.Problem{A: 7, B: 12}
	own := Prompter{}.Messages(p)
	if len(own) != 2 || own[0].Content != SystemPrompt || own[1].Content != p.Prompt() {
		t.Errorf("own model: %+v", own)
	}
	pre := Prompter{Pretrained: true}.Messages(p)
	if len(pre) != 1 || pre[0].Role != "user" || pre[0].Content != "7×12는 얼마인가요? 숫자 하나로만 답하세요." {
		t.Errorf("pretrained: %+v", pre)
	}
	tmpl := "What is {a}×{b}? ({a} times {b})"
	q := Prompter{Pretrained: true, Template: tmpl}.Messages(p)
	if len(q) != 1 || q[0].Content != "What is 7×12? (7 times 12)" {
		t.Errorf("template: %+v", q)
	}
	d, err := SFTDataset([]mult.Problem{p}, FormatBare, Prompter{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	if m := d.Rows[0].Prompt.Messages; len(m) != 2 || m[0].Content != SystemPrompt || m[1].Content != "What is 7×12? (7 times 12)" {
		t.Errorf("SFT row with a template: %+v", m)
	}
	if rows := PromptRows([]mult.Problem{p}, Prompter{Pretrained: true, Template: tmpl}); rows[0].Prompt.Messages[0].Content != q[0].Content || rows[0].Columns["answer"] != "84" {
		t.Errorf("GRPO row: %+v", rows[0])
	}
	for _, bad := range []string{"What is {a}?", "{b} times", ""} {
		if err := CheckTemplate(bad); err == nil || !strings.Contains(err.Error(), "{a} and {b}") {
			t.Errorf("CheckTemplate(%q) = %v, want an error naming {a} and {b}", bad, err)
		}
	}
	o := miniature(t, Default)
	o.Prompt = "What is {a}?"
	if _, err := Run(stdctx.Background(), o, Env{Backend: backend.MustNewForTests()}); err == nil || !strings.Contains(err.Error(), "{a} and {b}") {
		t.Errorf("Run with a bad template: %v", err)
	}
}

// The mixed format answers every problem in both forms, MixedSentences in MixedCopies with the
// sentence suffix: the format is not a property of the problem.
func TestSFTDataset_Formats(t *testing.T) {
	ps := []mult.Problem{{A: 3, B: 4}, {A: 7, B: 8}}
	bare, err := SFTDataset(ps, FormatBare, Prompter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(bare.Rows) != 2 || bare.Rows[1].Completion.Messages[0].Content != "56" {
		t.Errorf("bare: %d rows, second %+v", len(bare.Rows), bare.Rows[1].Completion)
	}
	mixed, err := SFTDataset(ps, FormatMixed, Prompter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(mixed.Rows) != 2*MixedCopies {
		t.Fatalf("mixed: %d rows, want %d", len(mixed.Rows), 2*MixedCopies)
	}
	counts := map[string]int{}
	for _, r := range mixed.Rows {
		counts[r.Completion.Messages[0].Content]++
	}
	want := map[string]int{"12": MixedCopies - MixedSentences, "12" + SentenceSuffix: MixedSentences,
		"56": MixedCopies - MixedSentences, "56" + SentenceSuffix: MixedSentences}
	for k, n := range want {
		if counts[k] != n {
			t.Errorf("mixed: %q %d times, want %d (all: %v)", k, counts[k], n, counts)
		}
	}
	if c := "12" + SentenceSuffix; mult.Strict(c, "12") || !mult.Correct(c, "12") {
		t.Errorf("%q: the sentence form must pass mult_correct and fail mult_strict", c)
	}
	if _, err := SFTDataset(ps, "json", Prompter{}); err == nil {
		t.Error("an unknown format must be an error")
	}
}

// miniature is o at the miniature tests' size: 3×3 problems (3 held out), a one-layer model of
// width 16, 3 SFT and 2 GRPO steps, in a fresh directory.
func miniature(t *testing.T, o Options) Options {
	o.OutputDir = t.TempDir()
	o.MaxFactor, o.HeldOut = 4, 3
	o.Shape = ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}
	o.SFTSteps, o.SFTBatch, o.GRPOSteps, o.GRPOPrompts, o.NumGenerations = 3, 4, 2, 2, 4
	return o
}

// A demo never replaces the runs of a demo of another model in its --output-dir: the directory is
// marked with the model it trains (DirMark), and an unmarked one holding stage directories is the
// demo's own model's.
func TestClaimDir_OneModelPerDirectory(t *testing.T) {
	root := t.TempDir()
	own, pre := filepath.Join(root, "own"), filepath.Join(root, "pre")
	old := filepath.Join(root, "old")
	if err := os.MkdirAll(filepath.Join(old, "grpo"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir, model, want string
	}{
		{own, "", ""},
		{own, "", ""}, // the same demo again
		{own, "Qwen/Qwen2.5-0.5B-Instruct", "holds the runs of the demo's own model, which a demo of --model Qwen/Qwen2.5-0.5B-Instruct would replace"},
		{pre, "a.gguf", ""},
		{pre, "a.gguf", ""},
		{pre, "b.gguf", "holds the runs of --model a.gguf, which a demo of --model b.gguf would replace"},
		{pre, "", "holds the runs of --model a.gguf, which a demo of the demo's own model would replace"},
		{old, "a.gguf", "holds the runs of the demo's own model"},
		{old, "", ""},
	} {
		err := claimDir(c.dir, c.model)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s, --model %q: %v", c.dir, c.model, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s, --model %q: %v, want %q", c.dir, c.model, err, c.want)
		}
	}
	if mark, err := os.ReadFile(filepath.Join(pre, DirMark)); err != nil || string(mark) != `{"model":"a.gguf"}`+"\n" {
		t.Errorf("mark %q, %v", mark, err)
	}
}
