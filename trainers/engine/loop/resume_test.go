package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// A resume is checked against the checkpoint before anything is loaded: a change of an option
// that changes the trajectory, of the dataset's or model's contents, or of the method is refused
// with one line naming it (and leaves training_args.yaml and metrics.jsonl as they were);
// resume_override lets the named options differ (each logged); options that do not change the
// trajectory, and paths whose contents are unchanged, may differ; an edited trainer_state.json is
// refused naming the field.
func TestRun_ResumeChecksTheCheckpoint(t *testing.T) {
	model := looptest.Model(t)
	train := looptest.MultFile(t, mult.SFT, 8, 6)
	base := sft.DefaultConfig()
	looptest.Common(t, &base.Training, 1e-3, 4, 1, 2)
	base.SaveSteps, base.Dataset = 1, train
	if _, err := sftRun(t, context.Background(), model, train, base, loop.Options{}); err != nil {
		t.Fatal(err)
	}
	other := looptest.MultFile(t, mult.SFT, 8, 7) // same size, other rows
	otherModel := filepath.Join(t.TempDir(), "model")
	if err := tinymodel.Write(otherModel, tinymodel.Options{Seed: 2}); err != nil { // same shapes, other weights
		t.Fatal(err)
	}
	moved := filepath.Join(t.TempDir(), "moved.jsonl")
	if err := os.WriteFile(moved, readFile(t, train), 0o644); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name  string
		model string
		data  string
		edit  func(c *sft.Config)
		state func(st map[string]any)
		want  []string // substrings of the error; none: the resume is accepted
		warn  string   // substring of a warning logged when accepted
	}{
		{name: "unchanged"},
		{name: "learning rate", edit: func(c *sft.Config) { c.LearningRate = 2e-3 },
			want: []string{"learning_rate 0.001 → 0.002", "--resume-override learning_rate", config.ResolvedName}},
		{name: "learning rate overridden", edit: func(c *sft.Config) { c.LearningRate, c.ResumeOverride = 2e-3, []string{"learning_rate"} },
			warn: "option=learning_rate checkpoint=0.001 now=0.002"},
		{name: "batch, accumulation and seed", edit: func(c *sft.Config) {
			c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps, c.Seed = 2, 2, 7
		}, want: []string{"per_device_train_batch_size 4 → 2", "gradient_accumulation_steps 1 → 2", "seed 42 → 7", "--resume-override per_device_train_batch_size,gradient_accumulation_steps,seed"}},
		{name: "schedule", edit: func(c *sft.Config) { c.LRSchedulerType, c.WarmupSteps = "cosine", 1 },
			want: []string{"warmup_steps 0 → 1", "lr_scheduler_type constant → cosine"}},
		{name: "max steps", edit: func(c *sft.Config) { c.MaxSteps = 5 }, want: []string{"max_steps 2 → 5"}},
		{name: "max steps extended on purpose", edit: func(c *sft.Config) { c.MaxSteps, c.ResumeOverride = 3, []string{"max_steps"} }},
		{name: "method option", edit: func(c *sft.Config) { c.MaxLength = 512 }, want: []string{"max_length 1024 → 512"}},
		{name: "free options", edit: func(c *sft.Config) { c.LoggingSteps, c.SaveSteps, c.SaveTotalLimit = 5, 7, 1 }},
		{name: "dataset contents", data: other, want: []string{"dataset_name content sha256:", "--resume-override dataset_name"}},
		{name: "dataset contents overridden", data: other, edit: func(c *sft.Config) { c.ResumeOverride = []string{"dataset_name"} }, warn: "option=dataset_name"},
		{name: "dataset moved", data: moved},
		{name: "model weights", model: otherModel, want: []string{"model_name_or_path content sha256:", "--resume-override model_name_or_path"}},
		{name: "method", state: func(st map[string]any) { st["method"] = "dpo" }, want: []string{"trained by dpo, this run is sft"}},
		{name: "global step edited", state: func(st map[string]any) { st["global_step"] = 99 }, want: []string{"global_step 99 is past max_steps 2"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := *base
			cfg.OutputDir = filepath.Join(t.TempDir(), "out")
			if err := os.CopyFS(cfg.OutputDir, os.DirFS(base.OutputDir)); err != nil {
				t.Fatal(err)
			}
			cfg.Resume = true
			if c.edit != nil {
				c.edit(&cfg)
			}
			if c.state != nil {
				editState(t, filepath.Join(cfg.OutputDir, "checkpoint-2", checkpoint.StateName), c.state)
			}
			args := readFile(t, filepath.Join(cfg.OutputDir, config.ResolvedName))
			metrics := readFile(t, filepath.Join(cfg.OutputDir, runlog.MetricsName))
			data := train
			if c.data != "" {
				data, cfg.Dataset = c.data, c.data
			}
			m := model
			if c.model != "" {
				m = c.model
			}
			var logs bytes.Buffer
			_, err := sftRun(t, context.Background(), m, data, &cfg, loop.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !strings.Contains(logs.String(), c.warn) {
					t.Errorf("no warning %q in the log:\n%s", c.warn, logs.String())
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
			for _, w := range append(c.want, "checkpoint-2") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if !bytes.Equal(readFile(t, filepath.Join(cfg.OutputDir, config.ResolvedName)), args) {
				t.Errorf("the refused resume rewrote %s", config.ResolvedName)
			}
			if !bytes.Equal(readFile(t, filepath.Join(cfg.OutputDir, runlog.MetricsName)), metrics) {
				t.Errorf("the refused resume changed %s", runlog.MetricsName)
			}
		})
	}
}

// editState rewrites a trainer_state.json through edit.
func editState(t *testing.T, path string, edit func(map[string]any)) {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal(readFile(t, path), &st); err != nil {
		t.Fatal(err)
	}
	edit(st)
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
