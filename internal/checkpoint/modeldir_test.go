package checkpoint

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeTree creates files (name → content; a name ending in / is a directory) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tree lists dir's files with their contents (directories end in /).
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(path)
		out[rel] = string(b)
		return err
	})
	return out
}

// fillModel is a fill writing one file per name, each holding version.
func fillModel(version string, names ...string) func(string) error {
	return func(tmp string) error {
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(tmp, n), []byte(version), 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

// WriteModel writes into a new or empty directory; refuses a non-empty one that holds no model
// posttrain wrote (naming what is there, with or without overwrite) and a model posttrain wrote
// without overwrite; with overwrite it replaces only the files of the model it replaces: the
// previous model's files the new one lacks go, the user's files stay. Nothing changes on refusal.
func TestWriteModel_OnlyNewEmptyOrItsOwn(t *testing.T) {
	for _, tc := range []struct {
		name      string
		before    map[string]string // nil: the directory does not exist
		overwrite bool
		wantErr   []string          // substrings of the refusal; nil: accepted
		after     map[string]string // the files after an accepted write, the mark aside
	}{
		{name: "missing", after: map[string]string{"config.json": "v2", "model.safetensors": "v2"}},
		{name: "empty", before: map[string]string{}, after: map[string]string{"config.json": "v2", "model.safetensors": "v2"}},
		{name: "a project folder", before: map[string]string{".git/HEAD": "ref", "main.go": "package main"},
			overwrite: true, wantErr: []string{"is not empty", ".git", "main.go", "holds no model posttrain wrote"}},
		{name: "someone's model", before: map[string]string{"config.json": "hf", "model.safetensors": "hf"},
			overwrite: true, wantErr: []string{"is not empty", "config.json", ModelMark}},
		{name: "its own model without --overwrite", before: map[string]string{"config.json": "v1", "model.safetensors": "v1",
			ModelMark: `{"written_by":"posttrain init","files":["config.json","model.safetensors"]}`},
			wantErr: []string{"holds a model posttrain wrote", "--overwrite", "config.json"}},
		{name: "its own model with --overwrite", overwrite: true, before: map[string]string{
			"config.json": "v1", "model-00001-of-00002.safetensors": "v1", "model-00002-of-00002.safetensors": "v1",
			"model.safetensors.index.json": "v1", "notes.txt": "mine", "checkpoint-3/trainer_state.json": "run",
			ModelMark: `{"written_by":"posttrain sft","files":["config.json","model-00001-of-00002.safetensors","model-00002-of-00002.safetensors","model.safetensors.index.json"]}`},
			after: map[string]string{"config.json": "v2", "model.safetensors": "v2", "notes.txt": "mine",
				"checkpoint-3/": "", "checkpoint-3/trainer_state.json": "run"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "model")
			if tc.before != nil {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				writeTree(t, dir, tc.before)
			}
			was := tree(t, dir)
			err := WriteModel(dir, "posttrain test", tc.overwrite, fillModel("v2", "config.json", "model.safetensors"))
			if tc.wantErr != nil {
				if err == nil {
					t.Fatal("accepted")
				}
				for _, w := range append(tc.wantErr, dir) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				if got := tree(t, dir); !equalTrees(got, was) {
					t.Errorf("a refused write changed the directory:\n got %v\nwant %v", got, was)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := tree(t, dir)
			mark := got[ModelMark]
			delete(got, ModelMark)
			if !equalTrees(got, tc.after) {
				t.Errorf("after the write:\n got %v\nwant %v", got, tc.after)
			}
			files, ok, err := ReadModelMark(dir)
			if err != nil || !ok || !slices.Equal(files, []string{"config.json", "model.safetensors"}) {
				t.Errorf("mark %q lists %v (%v, %v), want the new model's two files", mark, files, ok, err)
			}
			if !strings.Contains(mark, "posttrain test") {
				t.Errorf("mark %q does not name the writer", mark)
			}
		})
	}
}

func equalTrees(a, b map[string]string) bool {
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

// A directory that a live run holds is not replaced, even with overwrite.
func TestWriteModel_RefusesALiveRunsDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := WriteModel(dir, "posttrain test", false, fillModel("v1", "config.json")); err != nil {
		t.Fatal(err)
	}
	holder := holdLock(t, dir)
	err := WriteModel(dir, "posttrain test", true, fillModel("v2", "config.json"))
	if err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("writing into a live run's directory: %v, want a refusal naming the run", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "config.json")); string(b) != "v1" {
		t.Errorf("config.json is %q, want the untouched v1", b)
	}
	holder.Process.Kill()
	holder.Wait()
	if err := WriteModel(dir, "posttrain test", true, fillModel("v2", "config.json")); err != nil {
		t.Fatalf("after the holder died: %v", err)
	}
}

// A run's output directory: model files posttrain did not write refuse it (with or without
// overwrite, fresh or resumed); the final model it wrote (listed in the mark) is a previous run,
// and overwrite removes exactly the listed files, the mark, the logs and the checkpoints.
func TestRun_ModelFilesOnlyItsOwn(t *testing.T) {
	r := Run{Files: []string{"metrics.jsonl"}, Marks: []string{"metrics.jsonl"}, Model: []string{"config.json", "model.safetensors", "README.md"}}
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"config.json": "hf", "notes.txt": "mine"})
	for _, resume := range []bool{false, true} {
		for _, overwrite := range []bool{false, true} {
			err := r.Start(dir, resume, overwrite, discard())
			if err == nil || !strings.Contains(err.Error(), "config.json") || !strings.Contains(err.Error(), "did not write") {
				t.Errorf("resume %v overwrite %v: %v, want a refusal naming config.json", resume, overwrite, err)
			}
			if err := r.Check(dir, resume, overwrite); err == nil {
				t.Errorf("Check resume %v overwrite %v accepted the directory", resume, overwrite)
			}
		}
	}
	if got := tree(t, dir); len(got) != 2 {
		t.Fatalf("a refused start changed the directory: %v", got)
	}

	dir = t.TempDir()
	files := map[string]WriteFunc{"config.json": writeText("v1"), "model.safetensors": writeText("v1"), "README.md": writeText("card")}
	if err := WriteModelFiles(dir, "posttrain sft", files); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string]string{"metrics.jsonl": "{}\n", "notes.txt": "mine", "checkpoint-2/trainer_state.json": "{}"})
	if prev, err := r.Previous(dir); err != nil || !slices.Contains(prev, ModelMark) {
		t.Errorf("Previous %v (%v), want the finished model's mark among them", prev, err)
	}
	if err := r.Start(dir, false, false, discard()); err == nil || !strings.Contains(err.Error(), "previous run") {
		t.Errorf("a fresh start onto a finished run: %v, want the previous-run refusal", err)
	}
	if err := r.Start(dir, false, true, discard()); err != nil {
		t.Fatal(err)
	}
	if got := tree(t, dir); !equalTrees(got, map[string]string{"notes.txt": "mine"}) {
		t.Errorf("after overwrite_output_dir: %v, want only the user's notes.txt", got)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
