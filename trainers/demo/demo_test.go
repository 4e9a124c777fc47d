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
	o.Model, o.MaxCompletionLength = base, 3
	rep, err := Run(stdctx.Background(), o, Env{Backend: backend.MustNewForTests()})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range rep.Stages {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, "|"); got != "pretrained|GRPO mult_strict|GRPO random (control)" {
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
	for _, f := range []string{"grpo/model.safetensors", "grpo-random/model.safetensors"} {
		if _, err := os.Stat(filepath.Join(o.OutputDir, f)); err != nil {
			t.Error(err)
		}
	}
	lines, err := os.ReadFile(filepath.Join(o.OutputDir, "grpo", "training_args.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"model_name_or_path: " + base, "max_completion_length: 3"} {
		if !strings.Contains(string(lines), want) {
			t.Errorf("grpo/training_args.yaml has no %q:\n%s", want, lines)
		}
	}
}

// The mixed format answers every problem in both forms, MixedSentences in MixedCopies with the
// sentence suffix: the format is not a property of the problem.
func TestSFTDataset_Formats(t *testing.T) {
	ps := []mult.Problem{{A: 3, B: 4}, {A: 7, B: 8}}
	bare, err := SFTDataset(ps, FormatBare)
	if err != nil {
		t.Fatal(err)
	}
	if len(bare.Rows) != 2 || bare.Rows[1].Completion.Messages[0].Content != "56" {
		t.Errorf("bare: %d rows, second %+v", len(bare.Rows), bare.Rows[1].Completion)
	}
	mixed, err := SFTDataset(ps, FormatMixed)
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
	if _, err := SFTDataset(ps, "json"); err == nil {
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
