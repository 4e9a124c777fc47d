package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/posttrain/posttrain/models/safetensors"
)

func writeText(text string) WriteFunc {
	return func(path string) error { return os.WriteFile(path, []byte(text), 0o644) }
}

func sampleState(step int) *State {
	best := 0.25
	return &State{
		GlobalStep: step, Epoch: 1.5, MaxSteps: 10, LoggingSteps: 1, SaveSteps: 2, TrainBatchSize: 4,
		BestMetric: &best,
		LogHistory: []json.RawMessage{json.RawMessage(`{"step":1,"loss":"NaN"}`)},
		Data:       DataPosition{Epoch: 1, Offset: 12},
		RNG:        map[string][]uint64{"data": {1, 2, 1 << 63}},
		Extra:      map[string]json.RawMessage{"grpo": json.RawMessage(`{"buffered":false}`)},
	}
}

func TestSaveLoad_RoundTrip(t *testing.T) {
	out := t.TempDir()
	st := sampleState(4)
	dir, err := Save(out, st, map[string]WriteFunc{
		"optimizer.safetensors": writeText("opt"),
		"model/config.json":     writeText("{}"),
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(out, "checkpoint-4"); dir != want {
		t.Errorf("dir = %s, want %s", dir, want)
	}
	got, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	st.Files = []string{"model/config.json", "optimizer.safetensors"}
	st.Sizes = map[string]int64{"model/config.json": 2, "optimizer.safetensors": 3}
	if !reflect.DeepEqual(got, st) {
		t.Errorf("loaded %+v\nwant   %+v", got, st)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "optimizer.safetensors")); string(b) != "opt" {
		t.Errorf("optimizer blob = %q", b)
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != 1 {
		t.Errorf("output dir holds %d entries, want only checkpoint-4", len(entries))
	}
}

func TestSave_FailedWriterLeavesNothing(t *testing.T) {
	out := t.TempDir()
	if _, err := Save(out, sampleState(2), map[string]WriteFunc{"ok": writeText("x")}, 0); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("disk full")
	_, err := Save(out, sampleState(2), map[string]WriteFunc{
		"ok":  writeText("new"),
		"opt": func(string) error { return boom },
	}, 0)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "checkpoint-2") {
		t.Fatalf("got %v, want the writer's error naming the checkpoint", err)
	}
	// The previous checkpoint-2 is intact and no temporary directory is left.
	if b, _ := os.ReadFile(filepath.Join(out, "checkpoint-2", "ok")); string(b) != "x" {
		t.Errorf("previous checkpoint damaged: %q", b)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
	_, err = Save(out, sampleState(3), map[string]WriteFunc{"none": func(string) error { return nil }}, 0)
	if err == nil || !strings.Contains(err.Error(), "created no file") {
		t.Errorf("writer that writes nothing: got %v", err)
	}
	_, err = Save(out, sampleState(3), map[string]WriteFunc{"../escape": writeText("x")}, 0)
	if err == nil || !strings.Contains(err.Error(), "invalid checkpoint file name") {
		t.Errorf("escaping name: got %v", err)
	}
}

func TestSave_ReplacesExistingAndRemovesStaleTemp(t *testing.T) {
	out := t.TempDir()
	stale := filepath.Join(out, ".checkpoint-9.tmp-123")
	os.MkdirAll(stale, 0o755)
	Save(out, sampleState(5), map[string]WriteFunc{"a": writeText("1")}, 0)
	dir, err := Save(out, sampleState(5), map[string]WriteFunc{"a": writeText("2")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a")); string(b) != "2" {
		t.Errorf("got %q, want the new contents", b)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary directory kept")
	}
}

func TestSave_PrunesOldestBeyondLimit(t *testing.T) {
	out := t.TempDir()
	os.MkdirAll(filepath.Join(out, "checkpoint-1"), 0o755) // incomplete: not ours to delete or count
	for _, step := range []int{2, 4, 6, 8} {
		if _, err := Save(out, sampleState(step), nil, 2); err != nil {
			t.Fatal(err)
		}
	}
	cps, _ := List(out)
	var steps []int
	for _, cp := range cps {
		steps = append(steps, cp.Step)
	}
	if !reflect.DeepEqual(steps, []int{6, 8}) {
		t.Errorf("kept steps %v, want [6 8]", steps)
	}
	// Resumed from an old checkpoint: the one being written is never pruned even if oldest... by step.
	if _, err := Save(out, sampleState(3), nil, 1); err != nil {
		t.Fatal(err)
	}
	cps, _ = List(out)
	if len(cps) != 1 || cps[0].Step != 3 {
		t.Errorf("got %v, want only checkpoint-3 (the one just written)", cps)
	}
	if _, err := os.Stat(filepath.Join(out, "checkpoint-1")); err != nil {
		t.Errorf("incomplete directory was deleted")
	}
}

func TestLatestAndResumeDir(t *testing.T) {
	out := t.TempDir()
	if _, err := Latest(out); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("empty dir: got %v, want ErrNoCheckpoint", err)
	}
	if _, err := Latest(filepath.Join(out, "missing")); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("missing dir: got %v", err)
	}
	for _, step := range []int{9, 10, 100} {
		Save(out, sampleState(step), nil, 0)
	}
	os.MkdirAll(filepath.Join(out, "checkpoint-200"), 0o755) // no trainer_state.json
	os.MkdirAll(filepath.Join(out, "checkpoint-0300x"), 0o755)
	// The latest checkpoint is incomplete: an error naming it and the way out, not a silent
	// resume from checkpoint-100.
	for _, resume := range []func() (string, error){
		func() (string, error) { return Latest(out) },
		func() (string, error) { return ResumeDir(out, true, "") },
	} {
		_, err := resume()
		if err == nil || errors.Is(err, ErrNoCheckpoint) {
			t.Fatalf("incomplete latest checkpoint: got %v, want an error naming it", err)
		}
		for _, want := range []string{filepath.Join(out, "checkpoint-200"), StateName, filepath.Join(out, "checkpoint-100"), "--resume-from-checkpoint"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not name %q", err, want)
			}
		}
	}
	os.MkdirAll(filepath.Join(out, "checkpoint-50"), 0o755) // an incomplete older one does not matter
	os.Remove(filepath.Join(out, "checkpoint-200"))
	if got, err := Latest(out); err != nil || got != filepath.Join(out, "checkpoint-100") {
		t.Errorf("Latest = %s, %v; want checkpoint-100 (numeric, complete)", got, err)
	}
	if got, err := ResumeDir(out, true, ""); err != nil || got != filepath.Join(out, "checkpoint-100") {
		t.Errorf("ResumeDir(resume) = %s, %v; want checkpoint-100", got, err)
	}
	only := t.TempDir()
	os.MkdirAll(filepath.Join(only, "checkpoint-5"), 0o755)
	if _, err := Latest(only); err == nil || !strings.Contains(err.Error(), "no complete checkpoint") {
		t.Errorf("only an incomplete checkpoint: got %v", err)
	}
	os.MkdirAll(filepath.Join(out, "checkpoint-200"), 0o755)
	cases := []struct {
		resume bool
		path   string
		want   string
		err    string
	}{
		{false, "", "", ""},
		{true, "", "", "is incomplete"},
		{false, filepath.Join(out, "checkpoint-9"), filepath.Join(out, "checkpoint-9"), ""},
		{false, filepath.Join(out, "checkpoint-200"), "", "not a checkpoint directory"},
	}
	for _, c := range cases {
		got, err := ResumeDir(out, c.resume, c.path)
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ResumeDir(%v, %q) = %q, %v; want %q, %q", c.resume, c.path, got, err, c.want, c.err)
		}
	}
	if _, err := ResumeDir(t.TempDir(), true, ""); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("--resume without checkpoints: got %v", err)
	}
}

func TestLoad_Errors(t *testing.T) {
	out := t.TempDir()
	dir, _ := Save(out, sampleState(1), map[string]WriteFunc{"opt": writeText("x")}, 0)
	os.Remove(filepath.Join(dir, "opt"))
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "file opt listed in files is missing") {
		t.Errorf("missing blob: got %v", err)
	}
	os.WriteFile(filepath.Join(dir, StateName), []byte("{"), 0o644)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), StateName) {
		t.Errorf("corrupt state: got %v", err)
	}
}

// TestLoad_Validates: an edited, truncated or inconsistent checkpoint is refused before anything is
// read from it, naming the field.
func TestLoad_Validates(t *testing.T) {
	cases := []struct {
		name string
		edit func(dir string, st map[string]any)
		want string
	}{
		{"intact", func(string, map[string]any) {}, ""},
		{"step edited", func(_ string, st map[string]any) { st["global_step"] = 99 }, "global_step 99 is past max_steps 10"},
		{"step renamed", func(_ string, st map[string]any) { st["global_step"] = 3 }, "global_step 3 does not match the directory name checkpoint-4"},
		{"step zero", func(_ string, st map[string]any) { st["global_step"] = 0 }, "global_step 0"},
		{"offset", func(_ string, st map[string]any) { st["data_position"] = map[string]int{"epoch": 0, "offset": -1} }, "data_position"},
		{"truncated", func(dir string, _ map[string]any) { os.WriteFile(filepath.Join(dir, "opt"), []byte("xy"), 0o644) }, "file opt is 2 bytes, file_sizes says 3"},
		{"no sizes", func(_ string, st map[string]any) { delete(st, "file_sizes") }, "no file_sizes"},
		{"size entry", func(_ string, st map[string]any) { st["file_sizes"] = map[string]int{} }, "file_sizes has no entry for opt"},
		{"escape", func(_ string, st map[string]any) {
			st["files"] = []string{"../opt"}
			st["file_sizes"] = map[string]int{"../opt": 3}
		}, `invalid checkpoint file name "../opt"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, err := Save(t.TempDir(), sampleState(4), map[string]WriteFunc{"opt": writeText("xyz")}, 0)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, StateName)
			raw, _ := os.ReadFile(path)
			var st map[string]any
			if err := json.Unmarshal(raw, &st); err != nil {
				t.Fatal(err)
			}
			c.edit(dir, st)
			raw, _ = json.Marshal(st)
			os.WriteFile(path, raw, 0o644)
			_, err = Load(dir)
			if c.want == "" {
				if err != nil {
					t.Fatalf("intact checkpoint: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("got %v, want an error naming %s and %q", err, path, c.want)
			}
		})
	}
}

func TestAppendLog_KeepsTail(t *testing.T) {
	var st State
	for i := range 5 {
		st.AppendLog(json.RawMessage{byte('0' + i)}, 3)
	}
	if got := string(st.LogHistory[0]) + string(st.LogHistory[2]); len(st.LogHistory) != 3 || got != "24" {
		t.Errorf("log history %q", st.LogHistory)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestWatch_FirstSignalCancelsSecondExits(t *testing.T) {
	ch := make(chan os.Signal, 2)
	done := make(chan struct{})
	ctx, cancel := context.WithCancelCause(context.Background())
	exited := make(chan int, 1)
	go watch(ch, done, cancel, func(code int) { exited <- code }, quietLogger())
	ch <- syscall.SIGINT
	<-ctx.Done()
	if !Interrupted(ctx) {
		t.Fatalf("cause %v, want ErrInterrupted", context.Cause(ctx))
	}
	ch <- syscall.SIGTERM
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit code %d, want 130", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second signal did not exit")
	}
}

func TestNotifyContext_RealSIGINT(t *testing.T) {
	ctx, stop := NotifyContext(context.Background(), quietLogger())
	defer stop()
	if Interrupted(ctx) {
		t.Fatal("interrupted before any signal")
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("SIGINT did not cancel the context")
	}
	if !Interrupted(ctx) || !strings.Contains(context.Cause(ctx).Error(), "interrupt") {
		t.Errorf("cause = %v", context.Cause(ctx))
	}
}

func TestNotifyContext_StopIsNotInterrupt(t *testing.T) {
	ctx, stop := NotifyContext(context.Background(), quietLogger())
	stop()
	<-ctx.Done()
	if Interrupted(ctx) {
		t.Error("stop reported as an interrupt")
	}
}

// WriteFiles replaces a directory's files one by one: from its first rename to its last the
// directory holds the incomplete-model marker, so a run that fails (or is killed) between two
// renames leaves a directory that does not load as a model, with an error naming the marker; the
// next complete write removes it. A write that fails before any rename leaves no marker.
func TestWriteFiles_MarksTheModelIncompleteBetweenRenames(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, safetensors.IncompleteMarker)
	fail := func(string) error { return errors.New("disk full") }
	if err := WriteFiles(dir, map[string]WriteFunc{"a.bin": fail}); err == nil {
		t.Fatal("a failing writer was accepted")
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write that renamed nothing left the marker (stat: %v)", err)
	}
	if err := WriteFiles(dir, map[string]WriteFunc{"a.bin": writeText("new"), "b.bin": fail}); err == nil {
		t.Fatal("a failing writer was accepted")
	}
	_, err := safetensors.ReadModelDir(dir)
	if err == nil || !strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), "--resume") {
		t.Errorf("loading the half-replaced directory: %v, want an error naming %s and --resume", err, marker)
	}
	if err := WriteFiles(dir, map[string]WriteFunc{"a.bin": writeText("new"), "b.bin": writeText("new")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a complete write left the marker (stat: %v)", err)
	}
	if _, err := safetensors.ReadModelDir(dir); err == nil || strings.Contains(err.Error(), safetensors.IncompleteMarker) {
		t.Errorf("loading the complete directory (no weights): %v, want the error about missing weights", err)
	}
}

// A checkpoint directory and its files get the usual modes (0755, 0644 under umask 022), as HF's
// Trainer leaves them, not the private modes of os.MkdirTemp / os.CreateTemp.
func TestSave_UsualModes(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	out := t.TempDir()
	dir, err := Save(out, sampleState(2), map[string]WriteFunc{"opt": writeText("x")}, 0)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o755 | os.ModeDir, filepath.Join(dir, StateName): 0o644} {
		if fi, err := os.Stat(path); err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, fi.Mode(), err, want)
		}
	}
}

// The marker this package writes is the one models/safetensors refuses to read past.
func TestIncompleteMarker_SameAsSafetensors(t *testing.T) {
	if IncompleteMarker != safetensors.IncompleteMarker {
		t.Fatalf("checkpoint writes %q, safetensors looks for %q", IncompleteMarker, safetensors.IncompleteMarker)
	}
}
