package config_test

import (
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/sft"
)

// config.MarshalRun leaves out where and how the invocation started and does not touch cfg;
// config.ResumeChanges reads it back, refuses another method, and sorts changes by resume_override.
func TestMarshalRunAndResumeChanges(t *testing.T) {
	c := sft.DefaultConfig()
	c.Model, c.Dataset, c.OutputDir = "m", "d.jsonl", "/out"
	c.Resume, c.ResumeOverride = true, []string{"seed"}
	c.Resolve()
	saved, err := config.MarshalRun(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{"output_dir: /out", "resume: true", "- seed"} {
		if strings.Contains(string(saved), gone) {
			t.Errorf("MarshalRun kept %q:\n%s", gone, saved)
		}
	}
	if c.OutputDir != "/out" || !c.Resume || len(c.ResumeOverride) != 1 {
		t.Errorf("MarshalRun changed its argument: %+v", c.Training)
	}
	if config.SavedMethod(saved) != "sft" {
		t.Errorf("SavedMethod = %q", config.SavedMethod(saved))
	}

	now := *c
	now.OutputDir, now.LoggingSteps = "/elsewhere", 3 // free: never a change
	now.Seed, now.LearningRate = 7, 1e-4
	refused, allowed, err := config.ResumeChanges(saved, "ckpt/training_args.yaml", &now)
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || refused[0].Key != "learning_rate" || refused[0].String() != "learning_rate 2e-05 → 0.0001" {
		t.Errorf("refused %v, want learning_rate 2e-05 → 0.0001", refused)
	}
	if len(allowed) != 1 || allowed[0].Key != "seed" {
		t.Errorf("allowed %v, want seed", allowed)
	}

	d := dpo.DefaultConfig()
	if _, _, err := config.ResumeChanges(saved, "ckpt/training_args.yaml", d); err == nil || !strings.Contains(err.Error(), "trained by sft, this run is dpo") {
		t.Errorf("another method: %v", err)
	}
	d.ResumeOverride = []string{"learning_rat"}
	d.Model, d.Dataset, d.OutputDir = "m", "d.jsonl", "/out"
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), `resume_override (--resume-override) names "learning_rat"`) {
		t.Errorf("unknown override key: %v", err)
	}
}
