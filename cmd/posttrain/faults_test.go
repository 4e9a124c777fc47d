package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// Errors that used to name the wrong thing, or only an OS call, name the fault in one line:
// modules_to_save taking the target modules blamed --lora-target-modules; init (and merge) into
// the current directory failed with rename's "device or resource busy" on a temporary's name. Now
// a non-empty current directory (or its parent) is refused naming what is there, as any
// non-empty directory; nothing is written. An empty current directory is written into (no rename
// of the directory itself).
func TestErrors_NameTheFault(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	sftData := multData(t, dir, "sft", "4")
	adapter, _ := writeHandAdapter(t)
	base, err := filepath.Abs(filepath.Join(tinyFixture, "model")) // the subtests change directory
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"modules_to_save", []string{"sft", "--model", model, "--dataset", sftData, "--output-dir", filepath.Join(dir, "peft"),
			"--use-peft", "--lora-modules-to-save", "q_proj"},
			`lora_modules_to_save (--lora-modules-to-save): "q_proj" takes every q_proj layer, which target_modules (q_proj,v_proj) adapts`},
		{"init into the current directory", []string{"init", "--preset", "tiny", "--out", "."}, ". is not empty (notes.txt)"},
		{"init into its parent", []string{"init", "--preset", "tiny", "--out", ".."}, ".. is not empty (wd)"},
		{"merge into the current directory", []string{"merge", "--model", base, "--adapter", adapter,
			"--output-dir", "."}, ". is not empty (notes.txt)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wd := filepath.Join(t.TempDir(), "wd")
			writeFile(t, filepath.Join(wd, "notes.txt"), "mine")
			t.Chdir(wd)
			before := snapshot(t, filepath.Dir(wd))
			rc, stdout, stderr := runFilesOut(t, c.args...)
			if rc != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "busy") {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and one line containing %q", rc, stdout, stderr, c.want)
			}
			if !sameSnapshot(before, snapshot(t, filepath.Dir(wd))) {
				t.Error("the refused command wrote something")
			}
		})
	}
	wd := t.TempDir()
	t.Chdir(wd)
	if rc, stderr := runFiles(t, "init", "--preset", "tiny", "--out", "."); rc != 0 {
		t.Fatalf("init --out . in an empty directory: exit %d: %s", rc, stderr)
	}
	if _, err := os.Stat(filepath.Join(wd, "config.json")); err != nil {
		t.Errorf("init --out . in an empty directory: %v", err)
	}
}

// score with no scored token is an error, exit 1, nothing printed: it reported "loss": -0 (the
// mean of nothing) and exited 0. A padded row whose completion is all padding, and a one-token row
// (position 0 is never scored), score nothing.
func TestScore_NothingToScoreIsAnError(t *testing.T) {
	model := filepath.Join(tinyFixture, "model")
	for _, batch := range []string{
		`{"input_ids": [[5, 17, 301]], "attention_mask": [[1, 0, 0]], "completion_start": 1}`,
		`{"input_ids": [[5]], "completion_start": 0}`,
	} {
		input := filepath.Join(t.TempDir(), "batch.json")
		if err := os.WriteFile(input, []byte(batch), 0o644); err != nil {
			t.Fatal(err)
		}
		rc, stdout, stderr := runFilesOut(t, "score", "--model", model, "--input", input)
		if want := "posttrain: score: no token to score"; rc != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1 and one line starting %q", batch, rc, stdout, stderr, want)
		}
	}
}
