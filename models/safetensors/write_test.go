package safetensors

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Rewriting the fixture (written by transformers 4.43.1) gives the same bytes: same header layout,
// padding and data order as HuggingFace's writer.
func TestWriteFile_ReproducesHFBytes(t *testing.T) {
	src := filepath.Join(fixtureDir, SingleFileName)
	tensors, meta, err := ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var list []*Tensor
	for _, tt := range tensors {
		list = append(list, tt)
	}
	out := filepath.Join(t.TempDir(), "out.safetensors")
	if err := WriteFile(out, list, meta); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(src)
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, want) {
		t.Errorf("rewritten fixture differs: %d vs %d bytes; header %q", len(got), len(want), got[8:80])
	}
}

func sampleTensors(dtype string) []*Tensor {
	return []*Tensor{
		FromFloat32s("b.weight", []int{2, 3}, []float32{1, 2, 3, -4, 0.5, 1e-3}, dtype),
		FromFloat32s("a.bias", []int{3}, []float32{0.25, -0.125, 7}, dtype),
		FromFloat32s("scalar", []int{}, []float32{3}, dtype),
		FromFloat32s("empty", []int{0, 4}, nil, dtype),
		{Name: "ids", DType: "I64", Shape: []int{2}, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0}},
	}
}

func checkSame(t *testing.T, got map[string]*Tensor, want []*Tensor) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("got %d tensors, want %d", len(got), len(want))
	}
	for _, w := range want {
		g := got[w.Name]
		if g == nil || g.DType != w.DType || !equalInts(g.Shape, w.Shape) || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("tensor %q: got %+v, want %+v", w.Name, g, w)
		}
	}
}

func TestWriteFile_RoundTrip(t *testing.T) {
	for _, dtype := range []string{"F32", "BF16", "F16"} {
		t.Run(dtype, func(t *testing.T) {
			want := sampleTensors(dtype)
			path := filepath.Join(t.TempDir(), "m.safetensors")
			if err := WriteFile(path, want, map[string]string{"format": "pt", "note": "x"}); err != nil {
				t.Fatal(err)
			}
			got, meta, err := ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, got, want)
			if meta["note"] != "x" || meta["format"] != "pt" {
				t.Errorf("metadata = %v", meta)
			}
			raw, _ := os.ReadFile(path)
			if n := 8 + int(raw[0]) + int(raw[1])<<8; n%8 != 0 {
				t.Errorf("data section starts at %d, not 8-byte aligned", n)
			}
			if got["scalar"] == nil || got["scalar"].Shape == nil {
				t.Errorf("scalar shape should be [] not null")
			}
		})
	}
}

func TestWriteFile_Errors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	tests := []struct {
		name    string
		tensors []*Tensor
		want    string
	}{
		{"duplicate", []*Tensor{FromFloat32s("w", []int{1}, []float32{1}, "F32"), FromFloat32s("w", []int{1}, []float32{2}, "F32")}, `tensor "w" appears twice`},
		{"short data", []*Tensor{{Name: "w", DType: "F32", Shape: []int{2}, Data: make([]byte, 4)}}, `tensor "w": F32[2] needs 8 bytes, has 4`},
		{"bad dtype", []*Tensor{{Name: "w", DType: "F31", Shape: []int{1}, Data: make([]byte, 4)}}, `tensor "w": unknown dtype`},
		{"reserved name", []*Tensor{{Name: "__metadata__", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)}}, "invalid tensor name"},
	}
	for _, tc := range tests {
		err := WriteFile(path, tc.tensors, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: err = %v, want %q naming %s", tc.name, err, tc.want, path)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("failed writes left files: %v", entries)
	}
}

func TestWriteModelDir_ShardedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	want := sampleTensors("BF16")
	// Sizes: b.weight 12 B, a.bias 6, scalar 2, empty 0, ids 16; at most 16 B per shard:
	// [b.weight] [a.bias scalar empty] [ids].
	if err := WriteModelDir(dir, want, 16); err != nil {
		t.Fatal(err)
	}
	idx, err := ReadIndex(filepath.Join(dir, IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	wantMap := map[string]string{
		"b.weight": "model-00001-of-00003.safetensors",
		"a.bias":   "model-00002-of-00003.safetensors", "scalar": "model-00002-of-00003.safetensors", "empty": "model-00002-of-00003.safetensors",
		"ids": "model-00003-of-00003.safetensors",
	}
	gotMap, _ := json.Marshal(idx.WeightMap)
	wantJSON, _ := json.Marshal(wantMap)
	if string(gotMap) != string(wantJSON) {
		t.Errorf("weight_map = %s, want %s", gotMap, wantJSON)
	}
	if idx.Metadata["total_size"] != float64(36) {
		t.Errorf("total_size = %v, want 36", idx.Metadata["total_size"])
	}
	got, err := ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got, want)
	m, err := OpenModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, m.Tensors, want)
	must(t, m.Close())
	_, meta, _ := ReadFile(filepath.Join(dir, "model-00002-of-00003.safetensors"))
	if meta["format"] != "pt" {
		t.Errorf("shard metadata = %v, want format pt", meta)
	}

	// Rewriting as one file removes the index and the shards.
	if err := WriteModelDir(dir, want, 0); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != SingleFileName {
		t.Errorf("dir holds %v, want only %s", entries, SingleFileName)
	}
	got, err = ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	checkSame(t, got, want)
}

func TestReadModelDir_Errors(t *testing.T) {
	write := func(dir string, shards int) {
		t.Helper()
		if err := WriteModelDir(dir, sampleTensors("F32"), map[int]int64{1: 0, 3: 30}[shards]); err != nil {
			t.Fatal(err)
		}
	}
	editIndex := func(dir string, edit func(m map[string]string)) {
		t.Helper()
		idx, err := ReadIndex(filepath.Join(dir, IndexFileName))
		if err != nil {
			t.Fatal(err)
		}
		edit(idx.WeightMap)
		b, _ := json.Marshal(idx)
		if err := os.WriteFile(filepath.Join(dir, IndexFileName), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		setup func(dir string)
		want  string
	}{
		{"empty dir", func(string) {}, "has neither model.safetensors nor model.safetensors.index.json"},
		{"missing shard", func(dir string) {
			write(dir, 3)
			os.Remove(filepath.Join(dir, "model-00002-of-00003.safetensors"))
		}, "shard model-00002-of-00003.safetensors named in the index does not exist"},
		{"tensor missing from shard", func(dir string) {
			write(dir, 3)
			editIndex(dir, func(m map[string]string) { m["extra.weight"] = "model-00001-of-00003.safetensors" })
		}, `model-00001-of-00003.safetensors: tensor "extra.weight" is missing`},
		{"tensor not in index", func(dir string) {
			write(dir, 3)
			editIndex(dir, func(m map[string]string) { delete(m, "scalar") })
		}, `model-00002-of-00003.safetensors: tensor "scalar" is not mapped to this shard`},
		{"path escape", func(dir string) {
			write(dir, 3)
			editIndex(dir, func(m map[string]string) { m["ids"] = "../x.safetensors" })
		}, `tensor "ids" maps to invalid shard file name`},
		{"bad index json", func(dir string) {
			os.WriteFile(filepath.Join(dir, IndexFileName), []byte("{"), 0o644)
		}, IndexFileName},
		{"empty weight_map", func(dir string) {
			os.WriteFile(filepath.Join(dir, IndexFileName), []byte(`{"metadata":{}}`), 0o644)
		}, "empty or missing weight_map"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(dir)
			_, err := ReadModelDir(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v, want one line containing %q", err, tc.want)
			}
			if _, err2 := OpenModelDir(dir); err2 == nil || err == nil || err2.Error() != err.Error() {
				t.Errorf("OpenModelDir err = %v, want the same as ReadModelDir's", err2)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestReadModelDir_Fixture(t *testing.T) {
	got, err := ReadModelDir(fixtureDir)
	if err != nil || len(got) != 26 {
		t.Fatalf("ReadModelDir = %d tensors, %v", len(got), err)
	}
}

// A lazy tensor (Stream) is written with the bytes of the same tensor given whole, sharded by its
// size, and read back by Float32s; a Stream that fails or writes the wrong length fails the write
// and leaves nothing at the path.
func TestWriteFile_LazyTensors(t *testing.T) {
	whole := []*Tensor{FromFloat32s("a", []int{2, 3}, []float32{1, 2, 3, 4, 5, 6}, "BF16"), FromFloat32s("b", []int{4}, []float32{-1, 0.5, 7, 8}, "F32")}
	var lazy []*Tensor
	for _, w := range whole {
		data := w.Data
		stream := func(w io.Writer) error { // in two pieces
			if _, err := w.Write(data[:3]); err != nil {
				return err
			}
			_, err := w.Write(data[3:])
			return err
		}
		lazy = append(lazy, &Tensor{Name: w.Name, DType: w.DType, Shape: w.Shape, Stream: stream})
	}
	dir := t.TempDir()
	for name, ts := range map[string][]*Tensor{"whole": whole, "lazy": lazy} {
		if err := WriteModelDir(filepath.Join(dir, name), ts, 16); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{IndexFileName, "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"} {
		a, errA := os.ReadFile(filepath.Join(dir, "whole", f))
		b, errB := os.ReadFile(filepath.Join(dir, "lazy", f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Fatalf("%s differs (%v, %v)", f, errA, errB)
		}
	}
	if v, err := lazy[1].Float32s(); err != nil || v[2] != 7 {
		t.Fatalf("Float32s of a lazy tensor: %v, %v", v, err)
	}
	for _, c := range []struct {
		stream func(io.Writer) error
		want   string
	}{
		{func(io.Writer) error { return os.ErrClosed }, `tensor "c": file already closed`},
		{func(w io.Writer) error { _, err := w.Write(make([]byte, 3)); return err }, `tensor "c": F32[2] needs 8 bytes, its stream wrote 3`},
	} {
		path := filepath.Join(dir, "c.safetensors")
		err := WriteFile(path, []*Tensor{{Name: "c", DType: "F32", Shape: []int{2}, Stream: c.stream}}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("got %v, want %q", err, c.want)
		}
		if _, err := os.Stat(path); err == nil {
			t.Fatal("a failed write left a file")
		}
	}
}
