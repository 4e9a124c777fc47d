package gguf

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/tokenizer"
)

// FuzzParse: no input panics or allocates past what the file holds; a file that parses reads and
// dequantises every tensor it describes. Run: go test ./models/gguf -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	if data, err := os.ReadFile("testdata/types.gguf"); err == nil {
		f.Add(data)
	}
	f.Add(smallFile().bytes())
	f.Add(newBuilder().kv("k", TypeArray, []byte{9, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}).bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseBytes(data)
		if err != nil {
			return
		}
		for i := range g.Tensors {
			ti := &g.Tensors[i]
			if ti.Offset+ti.Bytes() > g.Size-g.DataOffset {
				t.Fatalf("tensor %q [%d, +%d) is past the data section of %d bytes", ti.Name, ti.Offset, ti.Bytes(), g.Size-g.DataOffset)
			}
			if !CanDequantize(ti.Type) {
				continue
			}
			if _, err := g.Float32(ti); err != nil {
				t.Fatalf("tensor %q: %v", ti.Name, err)
			}
		}
	})
}

// FuzzConfigAndTokenizer: whatever a parsed file's metadata holds, building the config and the
// tokenizer from it returns an error or a result, never a panic, a hang or an allocation sized by
// an unchecked count; a config it returns is valid.
func FuzzConfigAndTokenizer(f *testing.F) {
	tiny, _ := tinyLlama(f)
	f.Add(tiny)
	f.Add(smallFile().bytes())
	if data, err := os.ReadFile(filepath.Join("..", "testdata", "gguf", "qwen3-tiny.gguf")); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseBytes(data)
		if err != nil {
			return
		}
		if cfg, err := Config(g); err == nil {
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Config returned an invalid config: %v", err)
			}
		}
		if tj, _, err := Tokenizer(g); err == nil {
			_, _ = tokenizer.FromJSON(tj, "fuzz")
		}
	})
}

// FuzzOllamaManifest: a manifest of any bytes, looked up under any name, names a blob inside the
// models directory's blobs/ or is an error.
func FuzzOllamaManifest(f *testing.F) {
	digest := strings.Repeat("ab", 32)
	f.Add("m", []byte(`{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:`+digest+`","size":4}]}`))
	f.Add("m:latest", []byte(`{"layers":[{"mediaType":"application/vnd.ollama.image.adapter","digest":"sha256:`+digest+`","size":4}]}`))
	f.Add("../m", []byte(`{"layers":[]}`))
	f.Fuzz(func(t *testing.T, name string, manifest []byte) {
		dir := t.TempDir()
		at := filepath.Join(dir, "manifests", "registry.ollama.ai", "library", "m", "latest")
		if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(at, manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256-"+digest), []byte("GGUF"), 0o644); err != nil {
			t.Fatal(err)
		}
		path, got, err := OllamaBlob(dir, name)
		if err != nil {
			return
		}
		if want := filepath.Join(dir, "blobs", "sha256-"+strings.TrimPrefix(got, "sha256:")); path != want {
			t.Fatalf("OllamaBlob(%q) = %s (digest %s), want %s", name, path, got, want)
		}
	})
}
