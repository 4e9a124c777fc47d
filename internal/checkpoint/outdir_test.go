package checkpoint

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var testRun = Run{
	Files: []string{"metrics.jsonl", "training_args.yaml", "model.safetensors", "config.json"},
	Marks: []string{"metrics.jsonl", "model.safetensors"},
}

func touch(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A missing directory, an empty one, and one holding only unrelated files or what a run that
// failed before its first line leaves (training_args.yaml, an empty metrics.jsonl) start a run.
func TestStart_FreshDirectories(t *testing.T) {
	root := t.TempDir()
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	if err := testRun.Start(filepath.Join(root, "missing"), false, false, log); err != nil {
		t.Errorf("missing directory: %v", err)
	}
	touch(t, filepath.Join(root, "other", "notes.txt"), "mine")
	touch(t, filepath.Join(root, "other", "training_args.yaml"), "seed: 1\n")
	touch(t, filepath.Join(root, "other", "metrics.jsonl"), "")
	if err := testRun.Start(filepath.Join(root, "other"), false, false, log); err != nil {
		t.Errorf("no previous run: %v", err)
	}
}

// A directory holding a run is refused without resume or overwrite, naming it and both ways out;
// resume accepts it untouched; overwrite removes the run's files and nothing else.
func TestStart_PreviousRun(t *testing.T) {
	out := t.TempDir()
	touch(t, filepath.Join(out, "checkpoint-2", StateName), "{}")
	touch(t, filepath.Join(out, "checkpoint-4", "model.safetensors"), "w") // a partial one counts too
	touch(t, filepath.Join(out, "metrics.jsonl"), `{"step":1}`+"\n")
	touch(t, filepath.Join(out, "model.safetensors"), "w")
	touch(t, filepath.Join(out, "config.json"), "{}")
	touch(t, filepath.Join(out, "training_args.yaml"), "seed: 1\n")
	touch(t, filepath.Join(out, "notes.txt"), "mine")
	touch(t, filepath.Join(out, "checkpoint-best", "x"), "mine") // not a checkpoint name
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	err := testRun.Check(out, false, false)
	if err == nil {
		t.Fatal("Check accepted a directory holding a run")
	}
	err2 := testRun.Start(out, false, false, log)
	for _, e := range []error{err, err2} {
		if e == nil || strings.Contains(e.Error(), "\n") {
			t.Fatalf("error %v, want one line", e)
		}
		for _, want := range []string{out, "checkpoint-2", "--resume", "--overwrite-output-dir"} {
			if !strings.Contains(e.Error(), want) {
				t.Errorf("error %q does not name %q", e, want)
			}
		}
	}
	before := names(t, out)
	if err := testRun.Start(out, true, false, log); err != nil {
		t.Errorf("resume: %v", err)
	}
	if got := names(t, out); !slices.Equal(got, before) {
		t.Errorf("resume changed the directory: %v → %v", before, got)
	}
	if err := testRun.Start(out, false, true, log); err != nil {
		t.Fatalf("overwrite: %v", err)
	}
	if got, want := names(t, out), []string{"checkpoint-best", "notes.txt"}; !slices.Equal(got, want) {
		t.Errorf("after overwrite %v, want only the unrelated %v", got, want)
	}
	if !strings.Contains(buf.String(), "checkpoint-2") || !strings.Contains(buf.String(), "metrics.jsonl") {
		t.Errorf("the overwrite's log line does not name what it removed: %s", buf.String())
	}
}

// The temporaries of a killed save, rotation or model write are removed at the next start (on a
// resume too), with a log line naming them; similar names that a run does not write are kept.
func TestStart_RemovesStaleTemporaries(t *testing.T) {
	out := t.TempDir()
	touch(t, filepath.Join(out, "checkpoint-2", StateName), "{}")
	stale := []string{".checkpoint-4.tmp-123", ".checkpoint-3.tmp-9.old", ".deleting-checkpoint-1", ".model-77",
		".config.json.tmp", ".training_args.yaml.tmp-5", "metrics.jsonl.tmp", ".model.safetensors.tmp.old"}
	kept := []string{".mine.tmp", "notes.tmp", ".model-", "config.json.tmp-x"}
	for _, n := range append(slices.Clone(stale), kept...) {
		touch(t, filepath.Join(out, n, "f"), "x")
	}
	var buf bytes.Buffer
	if err := testRun.Start(out, true, false, slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
		t.Fatal(err)
	}
	got := names(t, out)
	want := append([]string{"checkpoint-2"}, kept...)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left %v, want %v", got, want)
	}
	for _, n := range stale {
		if !strings.Contains(buf.String(), n) {
			t.Errorf("the log does not name %s: %s", n, buf.String())
		}
	}
}

// Rotation renames a checkpoint out of its visible name before deleting it: stopped between the
// two (a kill), only complete checkpoints are visible, the newest loads, and the next start
// removes the hidden remains.
func TestPrune_RenamesBeforeDeleting(t *testing.T) {
	out := t.TempDir()
	for step := 1; step <= 2; step++ {
		if _, err := Save(out, sampleState(step), map[string]WriteFunc{"w.bin": writeText("w")}, 0); err != nil {
			t.Fatal(err)
		}
	}
	killed := errors.New("killed")
	Fault = func(phase string) {
		if phase != PhasePruneRenamed {
			return
		}
		if _, err := os.Stat(filepath.Join(out, ".deleting-checkpoint-1")); err != nil {
			t.Errorf("retiring checkpoint-1 not through .deleting-checkpoint-1: %v", err)
		}
		if _, err := os.Stat(filepath.Join(out, "checkpoint-1")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("checkpoint-1 is still visible while it is deleted: %v", err)
		}
		panic(killed) // stops Save here, as a kill would
	}
	defer func() { Fault = func(string) {} }()
	func() {
		defer func() {
			if r := recover(); r != killed {
				t.Fatalf("save with an interrupted rotation: recovered %v, want the kill", r)
			}
		}()
		Save(out, sampleState(3), map[string]WriteFunc{"w.bin": writeText("w")}, 2)
	}()
	cps, err := List(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 || cps[0].Step != 2 || cps[1].Step != 3 {
		t.Fatalf("visible %v, want checkpoint-2 and checkpoint-3", cps)
	}
	for _, n := range names(t, out) {
		if _, ok := stepOf(n); ok {
			if _, err := Load(filepath.Join(out, n)); err != nil {
				t.Errorf("visible %s does not load: %v", n, err)
			}
		}
	}
	latest, err := Latest(out)
	if err != nil || filepath.Base(latest) != "checkpoint-3" {
		t.Errorf("latest %s (%v), want checkpoint-3", latest, err)
	}
	if err := testRun.Start(out, true, false, slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))); err != nil {
		t.Fatal(err)
	}
	if got := names(t, out); !slices.Equal(got, []string{"checkpoint-2", "checkpoint-3"}) {
		t.Errorf("after the next start %v, want checkpoint-2 and checkpoint-3", got)
	}
	Fault = func(string) {}
	if _, err := Save(out, sampleState(4), map[string]WriteFunc{"w.bin": writeText("w")}, 2); err != nil {
		t.Fatal(err)
	}
	if got := names(t, out); !slices.Equal(got, []string{"checkpoint-3", "checkpoint-4"}) {
		t.Errorf("after a rotation %v, want checkpoint-3 and checkpoint-4", got)
	}
}
