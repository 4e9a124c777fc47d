package loop_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// A run into an output_dir holding a previous run is refused (naming the directory, --resume and
// --overwrite-output-dir) and changes nothing; with overwrite_output_dir the previous run's
// checkpoints, logs and model are removed first and unrelated files kept; an existing directory
// with only unrelated files just works.
func TestRun_OutputDirNeedsResumeOrOverwrite(t *testing.T) {
	dir := looptest.Model(t)
	train := looptest.MultFile(t, mult.SFT, 8, 6)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 4, 1, 2)
	cfg.SaveSteps = 1
	notes := filepath.Join(cfg.OutputDir, "notes.txt")
	if err := os.MkdirAll(cfg.OutputDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notes, []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sftRun(t, context.Background(), dir, train, cfg, loop.Options{}); err != nil {
		t.Fatalf("a directory with only unrelated files: %v", err)
	}
	metrics := readFile(t, filepath.Join(cfg.OutputDir, runlog.MetricsName))

	_, err := sftRun(t, context.Background(), dir, train, cfg, loop.Options{})
	if err == nil {
		t.Fatal("a second run into the same output_dir was accepted")
	}
	for _, want := range []string{cfg.OutputDir, "--resume", "--overwrite-output-dir"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if release, err := loop.CheckOutputDir(cfg, ""); err == nil {
		release()
		t.Error("CheckOutputDir accepted the directory")
	}
	if got := readFile(t, filepath.Join(cfg.OutputDir, runlog.MetricsName)); !bytes.Equal(got, metrics) {
		t.Error("the refused run changed metrics.jsonl")
	}
	if cps, _ := checkpoint.List(cfg.OutputDir); len(cps) != 2 {
		t.Errorf("the refused run left %v, want checkpoints 1 and 2", cps)
	}

	cfg.OverwriteOutputDir, cfg.MaxSteps = true, 1
	var logs bytes.Buffer
	if _, err := sftRun(t, context.Background(), dir, train, cfg, loop.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if cps, _ := checkpoint.List(cfg.OutputDir); len(cps) != 1 || cps[0].Step != 1 {
		t.Errorf("after overwriting: %v, want only the new checkpoint-1 (the old checkpoint-2 removed)", cps)
	}
	if recs, err := runlog.ReadMetrics(filepath.Join(cfg.OutputDir, runlog.MetricsName)); err != nil || len(recs) != 1 {
		t.Errorf("metrics.jsonl after overwriting: %d lines (%v), want the new run's 1", len(recs), err)
	}
	if b, err := os.ReadFile(notes); err != nil || string(b) != "mine" {
		t.Errorf("overwrite touched an unrelated file: %q %v", b, err)
	}
	if !strings.Contains(logs.String(), "checkpoint-2") {
		t.Errorf("no log line names the removed run: %s", logs.String())
	}
}

// Overwriting is refused when it would remove the model the run trains.
func TestRun_OverwriteKeepsTheInputModel(t *testing.T) {
	dir := looptest.Model(t)
	train := looptest.MultFile(t, mult.SFT, 8, 6)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 4, 1, 1)
	cfg.OutputDir, cfg.OverwriteOutputDir = filepath.Dir(dir), true // the model becomes OUTPUT_DIR/checkpoint-1
	if err := os.Rename(dir, filepath.Join(cfg.OutputDir, "checkpoint-1")); err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(cfg.OutputDir, "checkpoint-1")
	cfg.Model = dir
	_, err := sftRun(t, context.Background(), dir, train, cfg, loop.Options{})
	if err == nil || !strings.Contains(err.Error(), "model_name_or_path") {
		t.Fatalf("overwriting the model's directory: %v, want an error naming model_name_or_path", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		t.Errorf("the model was removed: %v", err)
	}
}

// A run killed during a save, a rotation or a model write leaves hidden temporaries; the next
// start (here a resume) removes them, naming them in a log line, and resumes from the newest
// visible checkpoint.
func TestRun_ResumeRemovesStaleTemporaries(t *testing.T) {
	dir := looptest.Model(t)
	train := looptest.MultFile(t, mult.SFT, 8, 6)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 4, 1, 2)
	cfg.SaveSteps, cfg.SaveTotalLimit = 1, 1
	if _, err := sftRun(t, context.Background(), dir, train, cfg, loop.Options{}); err != nil {
		t.Fatal(err)
	}
	stale := []string{".checkpoint-3.tmp-1234", ".deleting-checkpoint-1", ".model-5678", ".model.safetensors.tmp", ".training_args.yaml.tmp-42"}
	for _, n := range stale {
		if err := os.MkdirAll(filepath.Join(cfg.OutputDir, n), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg.OutputDir, n, "part"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	latest, err := checkpoint.Latest(cfg.OutputDir)
	if err != nil || filepath.Base(latest) != "checkpoint-2" {
		t.Fatalf("latest %s (%v), want checkpoint-2", latest, err)
	}
	looptest.Load(t, latest, false)
	cfg.Resume, cfg.MaxSteps, cfg.ResumeOverride = true, 3, []string{"max_steps"}
	var logs bytes.Buffer
	res, err := sftRun(t, context.Background(), dir, train, cfg, loop.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Steps != 3 {
		t.Errorf("resumed to step %d, want 3", res.Steps)
	}
	for _, n := range stale {
		if _, err := os.Stat(filepath.Join(cfg.OutputDir, n)); err == nil {
			t.Errorf("%s is still there", n)
		}
		if !strings.Contains(logs.String(), n) {
			t.Errorf("the log does not name %s", n)
		}
	}
}
