package checkpoint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An output that is or contains an input is refused, naming both, whatever the spelling: a
// trailing slash, "..", a symbolic link to the output or into it; an output inside an input, a
// sibling and an input that is not on disk (a Hub id) are fine.
func TestCheckOutside(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "out")
	writeTree(t, root, map[string]string{"out/checkpoint-1/config.json": "{}", "out/data.jsonl": "", "model/config.json": "{}", "train.jsonl": ""})
	if err := os.Symlink(out, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(out, "data.jsonl"), filepath.Join(root, "data-link.jsonl")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, out, in string
		want          string // "" accepted, else a substring of the refusal
	}{
		{"the output is the model", out, out, "is model"},
		{"trailing slash and ..", out + "/", filepath.Join(root, "model", "..", "out"), "is model"},
		{"the model under the output", out, filepath.Join(out, "checkpoint-1"), "contains model"},
		{"a dataset in the output", out, filepath.Join(out, "data.jsonl"), "contains model"},
		{"the output through a link", filepath.Join(root, "link"), out, "is model"},
		{"an input through a link into the output", out, filepath.Join(root, "data-link.jsonl"), "contains model"},
		{"an output spelled through a link and a missing part", filepath.Join(root, "link", "new", ".."), filepath.Join(out, "data.jsonl"), "contains model"},
		{"the output inside the model", filepath.Join(root, "model", "finetuned"), filepath.Join(root, "model"), ""},
		{"siblings", out, filepath.Join(root, "train.jsonl"), ""},
		{"a Hub id", out, "Qwen/Qwen2.5-0.5B-Instruct", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckOutside("output_dir", tc.out, []Input{{Name: "model", Path: tc.in}})
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range []string{tc.want, "output_dir", tc.out} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

// CheckFileOutside adds to CheckOutside an output file inside an input directory, through links.
func TestCheckFileOutside(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string]string{"model/model.safetensors": "w", "model.gguf": "g"})
	model := filepath.Join(root, "model")
	if err := os.Symlink(model, filepath.Join(root, "model-link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, out, want string
	}{
		{"a file of the model", filepath.Join(model, "model.safetensors"), "is inside model"},
		{"a new file in the model", filepath.Join(model, "new.gguf"), "is inside model"},
		{"through a link", filepath.Join(root, "model-link", "x.gguf"), "is inside model"},
		{"the input file itself", filepath.Join(root, "model.gguf"), "is the file"},
		{"beside them", filepath.Join(root, "out.gguf"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckFileOutside("--out", tc.out, []Input{{Name: "model", Path: model}, {Name: "the file", Path: filepath.Join(root, "model.gguf")}})
			switch {
			case tc.want == "" && err != nil:
				t.Fatal(err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("%v, want an error containing %q", err, tc.want)
			}
		})
	}
}
