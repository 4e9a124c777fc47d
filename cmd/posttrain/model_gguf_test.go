package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyGGUF is the Qwen3 GGUF gguf-py wrote from models/testdata/qwen3-tiny
// (scripts/reference/gguf_tiny.py).
var tinyGGUF = filepath.Join("..", "..", "models", "testdata", "gguf", "qwen3-tiny.gguf")

// fakeOllama builds an ollama models tree in a temporary HOME holding the tiny GGUF as
// NAME:TAG (manifest → model layer → blob), with the template layer ollama writes beside it.
func fakeOllama(t *testing.T, name, tag string) (home, blob string) {
	t.Helper()
	data, err := os.ReadFile(tinyGGUF)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	digest := hex.EncodeToString(sum[:])
	home = t.TempDir()
	models := filepath.Join(home, ".ollama", "models")
	blob = filepath.Join(models, "blobs", "sha256-"+digest)
	manifest := filepath.Join(models, "manifests", "registry.ollama.ai", "library", name, tag)
	for _, d := range []string{filepath.Dir(blob), filepath.Dir(manifest)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(blob, data, 0o644); err != nil {
		t.Fatal(err)
	}
	m, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
		"layers": []map[string]any{
			{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + digest, "size": len(data)},
			{"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:" + strings.Repeat("0", 64), "size": 10},
		}})
	if err := os.WriteFile(manifest, m, 0o644); err != nil {
		t.Fatal(err)
	}
	return home, blob
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// `--model FILE.gguf` and `--model ollama:NAME:TAG` score what `convert` then `--model DIR`
// scores, the conversion cached (a second run reuses it) and nothing written beside the input.
func TestModel_GGUFAndOllama(t *testing.T) {
	home, blob := fakeOllama(t, "tiny-qwen3", "v1")
	t.Setenv("HOME", home)
	t.Setenv("OLLAMA_MODELS", "")
	cache := t.TempDir()
	t.Setenv("POSTTRAIN_GGUF_CACHE", cache)
	batch := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(batch, []byte(`{"input_ids": [[509, 72, 101, 108, 108, 111, 511]], "attention_mask": [[1, 1, 1, 1, 1, 1, 1]], "completion_start": [1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "converted")
	if _, err := runCLI(t, "convert", tinyGGUF, "--out", dir); err != nil {
		t.Fatal(err)
	}
	want, err := runCLI(t, "score", "--model", dir, "--input", batch)
	if err != nil {
		t.Fatal(err)
	}
	blobDir := dirNames(t, filepath.Dir(blob))
	for _, model := range []string{blob, "ollama:tiny-qwen3:v1", "ollama:tiny-qwen3:v1"} {
		got, err := runCLI(t, "score", "--model", model, "--input", batch)
		if err != nil {
			t.Fatalf("--model %s: %v", model, err)
		}
		if got != want {
			t.Errorf("--model %s scores\n%s\nthe converted directory\n%s", model, got, want)
		}
	}
	if got := dirNames(t, filepath.Dir(blob)); !slices.Equal(got, blobDir) {
		t.Errorf("the blob directory changed: %v, was %v", got, blobDir)
	}
	// The file and the ollama blob are the same bytes at the same path: one conversion each way
	// (the path-keyed one and the digest-keyed one), reused the second time.
	if got := dirNames(t, cache); len(got) != 2 {
		t.Errorf("cache holds %v, want two conversions", got)
	}
	out, err := runCLI(t, "generate", "--model", "ollama:tiny-qwen3:v1", "--prompt", "Hello", "--max-new-tokens", "3", "--json")
	if err != nil || !strings.Contains(out, `"ids"`) {
		t.Errorf("generate --model ollama:…: %v %q", err, out)
	}
	for _, c := range []struct{ model, want string }{
		{"ollama:missing", "manifests/registry.ollama.ai/library/missing/latest"},
		{"ollama:a/b/c/d", "want NAME[:TAG]"},
		{"ollama:../x", `"..`},
	} {
		if _, err := runCLI(t, "score", "--model", c.model, "--input", batch); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--model %s: %v, want an error containing %q", c.model, err, c.want)
		}
	}
}
