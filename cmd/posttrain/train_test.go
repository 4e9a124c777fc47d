package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// multData writes `posttrain data mult --kind kind -n n` into dir and returns the file.
func multData(t *testing.T, dir, kind, n string) string {
	t.Helper()
	path := filepath.Join(dir, kind+".jsonl")
	if _, err := runCLI(t, "data", "mult", "--kind", kind, "-n", n, "-o", path); err != nil {
		t.Fatal(err)
	}
	return path
}

func metricsLines(t *testing.T, dir string) []runlog.Record {
	t.Helper()
	recs, err := runlog.ReadMetrics(filepath.Join(dir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// `posttrain sft` takes --config YAML with TRL's keys (flags win), writes the resolved config,
// metrics and the model, and --resume continues from the latest checkpoint.
func TestSFTCommand_ConfigAndResume(t *testing.T) {
	dir := t.TempDir()
	model, data, out := looptest.Model(t), multData(t, dir, "sft", "16"), filepath.Join(dir, "out")
	yaml := filepath.Join(dir, "sft.yaml")
	if err := os.WriteFile(yaml, []byte("learning_rate: 0.005\nper_device_train_batch_size: 4\nlogging_steps: 1\nmax_steps: 9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := runCLI(t, "sft", "--config", yaml, "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "sft: 2 steps;") {
		t.Errorf("output %q, want it to start with \"sft: 2 steps;\"", got)
	}
	args, err := os.ReadFile(filepath.Join(out, "training_args.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"learning_rate: 0.005", "max_steps: 2", "per_device_train_batch_size: 4"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("training_args.yaml lacks %q:\n%s", want, args)
		}
	}
	// Extending the run changes max_steps, which the resume check refuses unless told on purpose.
	if _, err := runCLI(t, "sft", "--config", yaml, "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "3", "--resume"); err == nil || !strings.Contains(err.Error(), "max_steps 2 → 3") || !strings.Contains(err.Error(), "--resume-override max_steps") {
		t.Fatalf("extending max_steps without --resume-override: got %v, want the check's error naming max_steps", err)
	}
	got, err = runCLI(t, "sft", "--config", yaml, "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "3", "--resume", "--resume-override", "max_steps")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "sft: 3 steps (1 after resuming at step 2); loss ") {
		t.Errorf("resumed run's summary %q", got)
	}
	if recs := metricsLines(t, out); len(recs) != 3 || recs[2].Step != 3 {
		t.Errorf("metrics after resume: %v, want steps 1, 2, 3", recs)
	}
	// Resuming the finished run trains nothing, and says so (it said "1 steps; loss 0").
	got, err = runCLI(t, "sft", "--config", yaml, "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "3", "--resume")
	if err != nil || !strings.HasPrefix(got, "sft: nothing left to train: resumed at step 3, where the run ends; model in ") || strings.Contains(got, "loss") {
		t.Errorf("resuming the finished run: %q, %v", got, err)
	}
	// The final model gets TRL's kind of model card.
	if card, err := os.ReadFile(filepath.Join(out, "README.md")); err != nil || !strings.Contains(string(card), "This model was trained with SFT, for 3 optimizer steps.") {
		t.Errorf("model card: %v\n%s", err, card)
	}
}

// `posttrain dpo`, `posttrain kto` and `posttrain eval mult` run end to end on a tiny checkpoint;
// a malformed dataset row is a one-line error naming file:line.
func TestDPOKTOEvalCommands(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	for _, kind := range []string{"dpo", "kto"} {
		out := filepath.Join(dir, kind)
		got, err := runCLI(t, kind, "--model", model, "--dataset", multData(t, dir, kind, "4"), "--output-dir", out,
			"--max-steps", "1", "--per-device-train-batch-size", "4", "--logging-steps", "1")
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if !strings.HasPrefix(got, kind+": 1 steps;") {
			t.Errorf("%s output %q", kind, got)
		}
		if recs := metricsLines(t, out); len(recs) != 1 {
			t.Errorf("%s: %d metrics lines, want 1", kind, len(recs))
		} else if _, ok := recs[0].Metrics["rewards/chosen"]; !ok {
			t.Errorf("%s metrics lack rewards/chosen: %v", kind, recs[0])
		}
	}
	got, err := runCLI(t, "eval", "mult", "--model", model, "--n", "4", "--seed", "3", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res evalMultResult
	if err := json.Unmarshal([]byte(got), &res); err != nil || res.N != 4 || res.Correct < 0 || res.Correct > 4 {
		t.Errorf("eval mult printed %q (%v)", got, err)
	}

	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"prompt": "a", "chosen": "b", "rejected": "c"}`+"\n"+`{"prompt": "a", "chosen": "b"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "dpo", "--model", model, "--dataset", bad, "--output-dir", filepath.Join(dir, "bad"))
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("malformed row: error %v, want one naming bad.jsonl:2", err)
	}
}

// A dataset that is a pipe is refused before anything is read: its fingerprint (for --resume and
// the model card) would be the empty file's, since a pipe cannot be read twice.
func TestTrain_DatasetPipeRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "rows.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	rc, stderr := runFiles(t, "sft", "--model", looptest.Model(t), "--dataset", fifo, "--output-dir", filepath.Join(dir, "out"), "--max-steps", "1")
	if rc != 1 || !strings.Contains(stderr, "dataset_name (--dataset) "+fifo+" is not a regular file") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("rc %d, stderr %q", rc, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "out")); err == nil {
		t.Error("the output directory was made")
	}
}
