package safetensors

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzReadIndex checks that no model.safetensors.index.json makes ReadIndex (or loading a
// directory through it) panic, and that an accepted index names only plain shard file names.
// Seeds: the index WriteModelDir writes for the qwen2-tiny fixture split into shards, plus edge cases.
func FuzzReadIndex(f *testing.F) {
	tensors, _, err := ReadFile(filepath.Join(fixtureDir, SingleFileName))
	if err != nil {
		f.Fatal(err)
	}
	var list []*Tensor
	for _, name := range sortedKeys(tensors) {
		list = append(list, tensors[name])
	}
	dir := f.TempDir()
	if err := WriteModelDir(dir, list, 1024); err != nil {
		f.Fatal(err)
	}
	real, err := os.ReadFile(filepath.Join(dir, IndexFileName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	f.Add([]byte(`{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00001.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x.safetensors","b":"."}}`))
	f.Add([]byte(`{"weight_map":{"a":null,"b":7}}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		d := t.TempDir()
		path := filepath.Join(d, IndexFileName)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		idx, err := ReadIndex(path)
		if err != nil {
			if idx != nil {
				t.Fatalf("ReadIndex returned an index with error %v", err)
			}
			return
		}
		if len(idx.WeightMap) == 0 {
			t.Fatal("accepted an index without tensors")
		}
		for _, s := range idx.Shards() {
			if s == "" || s != filepath.Base(s) || strings.ContainsAny(s, `/\`) {
				t.Fatalf("accepted shard name %q", s)
			}
		}
		// The shards are absent: loading the directory must be an error, not a panic.
		if _, err := ReadModelDir(d); err == nil {
			t.Fatal("ReadModelDir accepted a directory without its shards")
		}
	})
}
