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

// A GGUF rewritten in place with other bytes, at the same size, inode and modification time, is
// converted anew: the cache is keyed by the content, never stale. A .gguf path that is missing,
// empty or not a GGUF says so, before any Hub look-up.
func TestModel_GGUFCacheFollowsTheContent(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("POSTTRAIN_GGUF_CACHE", cache)
	data, err := os.ReadFile(tinyGGUF)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, data, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(model)
	if err != nil {
		t.Fatal(err)
	}
	batch := filepath.Join(dir, "batch.json")
	if err := os.WriteFile(batch, []byte(`{"input_ids": [[509, 72, 101, 108, 108, 111, 511]], "attention_mask": [[1, 1, 1, 1, 1, 1, 1]], "completion_start": [1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := runCLI(t, "score", "--model", model, "--input", batch)
	if err != nil {
		t.Fatal(err)
	}
	// Another model in the same file: every float32 of the last tensor's data negated (its sign
	// bytes), written in place, the time set back.
	f, err := os.OpenFile(model, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for off := len(data) - 1; off >= len(data)-4*64; off -= 4 {
		if _, err := f.WriteAt([]byte{data[off] ^ 0x80}, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(model, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Stat(model); again.Size() != st.Size() || !again.ModTime().Equal(st.ModTime()) {
		t.Fatal("the rewritten file's size or time differs: the test cannot tell")
	}
	second, err := runCLI(t, "score", "--model", model, "--input", batch)
	if err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, cache); len(got) != 2 {
		t.Errorf("cache holds %v after the file was rewritten, want two conversions", got)
	}
	if second == first {
		t.Error("the rewritten GGUF scores as the old one: its stale conversion was used")
	}
	// A run never writes into the cache, where overwrite_output_dir would clear the conversion it reads.
	conversion := filepath.Join(cache, dirNames(t, cache)[0])
	sftData := multData(t, dir, "sft", "4")
	before := dirNames(t, conversion)
	for _, args := range [][]string{
		{"sft", "--model", model, "--dataset", sftData, "--output-dir", conversion, "--overwrite-output-dir", "--max-steps", "1"},
		{"merge", "--model", model, "--adapter", dir, "--output-dir", filepath.Join(cache, "merged")},
	} {
		rc, stderr := runFiles(t, args...)
		if rc != 1 || !strings.Contains(stderr, "the cache of converted GGUF files") {
			t.Errorf("%s into the cache: rc %d, %q", args[0], rc, stderr)
		}
	}
	if got := dirNames(t, conversion); !slices.Equal(got, before) {
		t.Errorf("the conversion holds %v, was %v", got, before)
	}
	empty := filepath.Join(dir, "empty.gguf")
	text := filepath.Join(dir, "text.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(text, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ model, want string }{
		{filepath.Join(dir, "absent.gguf"), "absent.gguf: no such file"},
		{empty, "empty.gguf is empty, not a GGUF file"},
		{text, `text.gguf is not a GGUF file: it does not start with "GGUF"`},
	} {
		if _, err := runCLI(t, "score", "--model", c.model, "--input", batch); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--model %s: %v, want an error containing %q", c.model, err, c.want)
		}
	}
}

// An error about a GGUF --model names the user's file, never the cache entry it was converted to.
func TestModel_GGUFErrorsNameTheFile(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("POSTTRAIN_GGUF_CACHE", cache)
	rc, stderr := runFiles(t, "score-reward", "--model", tinyGGUF, "--text", "hello")
	if rc != 1 || !strings.Contains(stderr, tinyGGUF) || strings.Contains(stderr, cache) {
		t.Errorf("rc %d, stderr %q: want the file %s named and not the cache %s", rc, stderr, tinyGGUF, cache)
	}
}
