package main

// The output-directory rules, table by table: no command deletes what it reads (inputs inside
// outputs), no writer replaces what it did not write (non-empty output directories), one run per
// output directory (concurrent runs, with real processes).

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// snapshot is every file under dir with its content's hash (directories end in /).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameSnapshot(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// copyDir copies src to dst (a new directory) and returns dst.
func copyDir(t *testing.T, src, dst string) string {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A command whose output directory is or contains one of its inputs is refused in one line naming
// both, with or without --overwrite-output-dir / --overwrite, before anything is removed: the
// input is byte-identical afterwards. (Before, --model DIR --output-dir DIR --overwrite-output-dir
// deleted the model, and grpo --reward-model DIR --output-dir DIR replaced the reward model and
// exited 0.)
func TestOutputs_InputsInsideRefused(t *testing.T) {
	root := t.TempDir()
	model := looptest.Model(t)
	data := multData(t, root, "sft", "8")
	pairs := multData(t, root, "dpo", "8")
	sft := func(extra ...string) []string {
		return append([]string{"sft", "--max-steps", "1", "--per-device-train-batch-size", "2"}, extra...)
	}
	for _, tc := range []struct {
		name string
		// setup makes the directory the case works in (a copy of the model, a dataset inside it,
		// ...) and returns it with the arguments.
		setup func(dir string) []string
		want  string // a substring naming the input
	}{
		{"sft --model DIR --output-dir DIR", func(dir string) []string {
			copyDir(t, model, dir)
			return sft("--model", dir, "--dataset", data, "--output-dir", dir)
		}, "is model_name_or_path (--model)"},
		{"... --overwrite-output-dir", func(dir string) []string {
			copyDir(t, model, dir)
			return sft("--model", dir, "--dataset", data, "--output-dir", dir, "--overwrite-output-dir")
		}, "is model_name_or_path (--model)"},
		{"--model OUT/checkpoint-1 --overwrite-output-dir", func(dir string) []string {
			copyDir(t, model, filepath.Join(dir, "checkpoint-1"))
			return sft("--model", filepath.Join(dir, "checkpoint-1"), "--dataset", data, "--output-dir", dir, "--overwrite-output-dir")
		}, "contains model_name_or_path (--model)"},
		{"--output-dir through a symbolic link to the model", func(dir string) []string {
			copyDir(t, model, dir)
			link := dir + "-link"
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			return sft("--model", dir, "--dataset", data, "--output-dir", link+"/", "--overwrite-output-dir")
		}, "is model_name_or_path (--model)"},
		{"the dataset inside the output", func(dir string) []string {
			copyDir(t, filepath.Dir(data), dir)
			return sft("--model", model, "--dataset", filepath.Join(dir, "sft.jsonl"), "--output-dir", dir)
		}, "contains dataset_name (--dataset)"},
		{"the eval dataset inside the output", func(dir string) []string {
			copyDir(t, filepath.Dir(data), dir)
			return sft("--model", model, "--dataset", data, "--eval-dataset", filepath.Join(dir, "sft.jsonl"), "--output-dir", dir)
		}, "contains eval_dataset (--eval-dataset)"},
		{"the --config file inside the output", func(dir string) []string {
			writeFile(t, filepath.Join(dir, "sft.yaml"), "learning_rate: 0.001\n")
			return sft("--config", filepath.Join(dir, "sft.yaml"), "--model", model, "--dataset", data, "--output-dir", dir)
		}, "contains the configuration (--config)"},
		{"dpo, the model inside the output", func(dir string) []string {
			copyDir(t, model, filepath.Join(dir, "base"))
			return []string{"dpo", "--model", filepath.Join(dir, "base"), "--dataset", pairs, "--output-dir", dir, "--overwrite-output-dir", "--max-steps", "1"}
		}, "contains model_name_or_path (--model)"},
		{"grpo --reward-model DIR --output-dir DIR", func(dir string) []string {
			copyDir(t, model, dir)
			return []string{"grpo", "--model", model, "--reward-model", dir, "--dataset", "mult", "--output-dir", dir, "--overwrite-output-dir", "--max-steps", "1"}
		}, "is reward_model_name_or_path (--reward-model)"},
		{"ppo --reward-model DIR --output-dir DIR", func(dir string) []string {
			copyDir(t, model, dir)
			return []string{"ppo", "--model", model, "--reward-model", dir, "--dataset", "mult", "--output-dir", dir, "--overwrite-output-dir", "--max-steps", "1"}
		}, "is reward_model_path (--reward-model)"},
		{"ppo --value-model inside the output", func(dir string) []string {
			copyDir(t, model, filepath.Join(dir, "value"))
			return []string{"ppo", "--model", model, "--reward-model", model, "--value-model", filepath.Join(dir, "value"), "--dataset", "mult", "--output-dir", dir, "--max-steps", "1"}
		}, "contains value_model_path (--value-model)"},
		{"reward, the model is the output", func(dir string) []string {
			copyDir(t, model, dir)
			return []string{"reward", "--model", dir, "--dataset", pairs, "--output-dir", dir, "--overwrite-output-dir", "--max-steps", "1"}
		}, "is model_name_or_path (--model)"},
		{"merge onto its own base", func(dir string) []string {
			copyDir(t, model, dir)
			return []string{"merge", "--model", dir, "--adapter", model, "--output-dir", dir, "--overwrite"}
		}, "is the base model (--model)"},
		{"merge onto its adapter", func(dir string) []string {
			copyDir(t, model, dir)
			return []string{"merge", "--model", model, "--adapter", dir, "--output-dir", dir, "--overwrite"}
		}, "is the adapter (--adapter)"},
		{"init --tokenizer inside --out", func(dir string) []string {
			copyDir(t, model, dir)
			return []string{"init", "--preset", "tiny", "--tokenizer", dir, "--out", dir, "--overwrite"}
		}, "is --tokenizer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := tc.setup(dir)
			before := snapshot(t, dir)
			rc, stderr := runFiles(t, args...)
			if rc == 0 {
				t.Fatalf("exit 0, want a refusal; stderr %s", stderr)
			}
			msg := strings.TrimSpace(stderr)
			if strings.Count(msg, "\n") > 0 || !strings.Contains(msg, tc.want) || !strings.Contains(msg, "which this command reads") {
				t.Errorf("stderr %q, want one line naming %q", msg, tc.want)
			}
			if after := snapshot(t, dir); !sameSnapshot(before, after) {
				t.Errorf("the refused command changed %s:\nbefore %v\nafter  %v", dir, before, after)
			}
		})
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// init and merge write into a new or empty directory, or replace a model posttrain wrote when told
// to (--overwrite), and then only that model's files; a project folder, a directory holding a model
// posttrain did not write and a finished run without --overwrite are refused naming what is there,
// unchanged. A training run refuses an output_dir holding a model (or a README.md the model card
// would replace) that posttrain did not write, even with --overwrite-output-dir.
func TestOutputs_NonEmptyDirectories(t *testing.T) {
	model := looptest.Model(t)
	data := multData(t, t.TempDir(), "sft", "8")
	// A finished run: its final model, a checkpoint, metrics, and the user's notes beside them.
	run := filepath.Join(t.TempDir(), "run")
	if _, err := runCLI(t, "sft", "--model", model, "--dataset", data, "--output-dir", run, "--max-steps", "1",
		"--per-device-train-batch-size", "2", "--save-steps", "1"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(run, "notes.txt"), "mine")
	files, marked, err := checkpoint.ReadModelMark(run)
	if err != nil || !marked || !slices.Contains(files, "model.safetensors") || !slices.Contains(files, "README.md") {
		t.Fatalf("the run's final model is not listed in its mark: %v %v %v", files, marked, err)
	}
	for _, tc := range []struct {
		name  string
		setup func(dir string) []string // returns the arguments
		want  string                    // "" accepted, else a substring of the refusal
		check func(t *testing.T, dir string)
	}{
		{"init --out onto a project folder, even with --overwrite", func(dir string) []string {
			writeFile(t, filepath.Join(dir, ".git", "HEAD"), "ref: refs/heads/main\n")
			writeFile(t, filepath.Join(dir, "main.go"), "package main\n")
			return []string{"init", "--preset", "tiny", "--out", dir, "--overwrite"}
		}, "is not empty (.git, main.go) and holds no model posttrain wrote", nil},
		{"init --out onto someone's model", func(dir string) []string {
			copyDir(t, model, dir)
			os.Remove(filepath.Join(dir, checkpoint.ModelMark))
			return []string{"init", "--preset", "tiny", "--out", dir, "--overwrite"}
		}, "holds no model posttrain wrote", nil},
		{"init --out onto a finished run without --overwrite", func(dir string) []string {
			copyDir(t, run, dir)
			return []string{"init", "--preset", "tiny", "--out", dir}
		}, "holds a model posttrain wrote", nil},
		{"init --out onto a finished run with --overwrite", func(dir string) []string {
			copyDir(t, run, dir)
			return []string{"init", "--preset", "tiny", "--out", dir, "--overwrite", "--seed", "7"}
		}, "", func(t *testing.T, dir string) {
			for _, keep := range []string{"notes.txt", "metrics.jsonl", "checkpoint-1/trainer_state.json", "training_args.yaml"} {
				if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
					t.Errorf("--overwrite removed %s, which is not the model's", keep)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "README.md")); err == nil {
				t.Error("the replaced model's card README.md is still there")
			}
		}},
		{"init --out into an empty directory", func(dir string) []string {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			return []string{"init", "--preset", "tiny", "--out", dir}
		}, "", nil},
		{"merge --output-dir onto a finished run without --overwrite", func(dir string) []string {
			copyDir(t, run, dir)
			adapter, _ := writeHandAdapter(t)
			return []string{"merge", "--model", looptest.Fixture(t, "qwen2-tiny"), "--adapter", adapter, "--output-dir", dir}
		}, "holds a model posttrain wrote", nil},
		{"sft into a directory holding a model posttrain did not write", func(dir string) []string {
			copyDir(t, model, dir)
			os.Remove(filepath.Join(dir, checkpoint.ModelMark))
			return []string{"sft", "--model", model, "--dataset", data, "--output-dir", dir, "--overwrite-output-dir", "--max-steps", "1"}
		}, "which posttrain did not write", nil},
		{"sft into a directory with the user's README.md", func(dir string) []string {
			writeFile(t, filepath.Join(dir, "README.md"), "my notes\n")
			return []string{"sft", "--model", model, "--dataset", data, "--output-dir", dir, "--max-steps", "1"}
		}, "holds README.md, which posttrain did not write", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			args := tc.setup(dir)
			before := snapshot(t, dir)
			rc, stderr := runFiles(t, args...)
			msg := strings.TrimSpace(stderr)
			if tc.want == "" {
				if rc != 0 {
					t.Fatalf("exit %d: %s", rc, msg)
				}
			} else {
				if rc == 0 {
					t.Fatalf("exit 0, want a refusal naming %q", tc.want)
				}
				if strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want) || !strings.Contains(msg, dir) {
					t.Errorf("stderr %q, want one line naming %s and %q", msg, dir, tc.want)
				}
				if after := snapshot(t, dir); !sameSnapshot(before, after) {
					t.Errorf("the refused command changed %s", dir)
				}
			}
			if tc.check != nil {
				tc.check(t, dir)
			}
		})
	}
}

// concurrentEnv makes this test binary a child process running `posttrain ARGS...` (JSON) that
// stops for good inside its first checkpoint save (after the files are written and synced, before
// the rename), after writing READY_FILE: a live run caught in the middle of its work.
const concurrentEnv = "POSTTRAIN_CONCURRENT_HELPER"

type concurrentSpec struct {
	Args  []string
	Ready string
}

func TestConcurrentHelper(t *testing.T) {
	raw := os.Getenv(concurrentEnv)
	if raw == "" {
		t.Skip("the child process of TestOutputs_OneRunPerDirectory")
	}
	var spec concurrentSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	checkpoint.Fault = func(phase string) {
		if phase == checkpoint.PhaseSaveSynced {
			os.WriteFile(spec.Ready, nil, 0o644)
			time.Sleep(time.Hour) // until killed
		}
	}
	runFiles(t, spec.Args...)
}

// A second run, a --resume and an --overwrite-output-dir against a live run are refused naming
// its pid, and the live run's temporaries are left alone (they used to be removed as "an
// interrupted run's", killing the live run at its next save); after the live run is SIGKILLed the
// directory is free at once, and the next run cleans up and owns metrics.jsonl alone.
func TestOutputs_OneRunPerDirectory(t *testing.T) {
	model := looptest.Model(t)
	dir := t.TempDir()
	data := multData(t, dir, "sft", "8")
	out, ready := filepath.Join(dir, "out"), filepath.Join(dir, "ready")
	args := []string{"sft", "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "2",
		"--per-device-train-batch-size", "2", "--save-steps", "1", "--logging-steps", "1"}
	spec, _ := json.Marshal(concurrentSpec{Args: args, Ready: ready})
	child := exec.Command(os.Args[0], "-test.run=^TestConcurrentHelper$", "-test.count=1")
	child.Env = append(os.Environ(), concurrentEnv+"="+string(spec))
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live run never reached its first save")
		}
	}
	temporaries := func() []string {
		var tmp []string
		entries, _ := os.ReadDir(out)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".checkpoint-") {
				tmp = append(tmp, e.Name())
			}
		}
		return tmp
	}
	live := temporaries()
	if len(live) != 1 {
		t.Fatalf("the live run's temporaries: %v, want its checkpoint being saved", live)
	}
	pid := "pid " + strconv.Itoa(child.Process.Pid)
	for _, extra := range [][]string{nil, {"--resume"}, {"--overwrite-output-dir"}} {
		rc, stderr := runFiles(t, append(slices.Clone(args), extra...)...)
		msg := strings.TrimSpace(stderr)
		if rc == 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, "in use by another posttrain run") || !strings.Contains(msg, pid) {
			t.Errorf("%v against a live run: exit %d, stderr %q, want one line naming %s", extra, rc, msg, pid)
		}
		if got := temporaries(); !slices.Equal(got, live) {
			t.Errorf("%v removed the live run's temporaries: %v, want %v", extra, got, live)
		}
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	if rc, stderr := runFiles(t, append(slices.Clone(args), "--overwrite-output-dir")...); rc != 0 {
		t.Fatalf("after the live run was killed: exit %d: %s", rc, stderr)
	}
	if got := temporaries(); len(got) != 0 {
		t.Errorf("the killed run's temporaries are still there: %v", got)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(out, runlog.MetricsName))
	if err != nil || len(recs) != 2 || recs[0].Step != 1 || recs[1].Step != 2 {
		t.Errorf("metrics.jsonl: %v (%v), want the one run's steps 1 and 2", recs, err)
	}
}
