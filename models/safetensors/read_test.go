package safetensors

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtureDir = "../testdata/qwen2-tiny/model"

// Expected values computed from the fixture with Python's struct module (no numpy).
func TestReadFile_QwenTinyFixture(t *testing.T) {
	path := filepath.Join(fixtureDir, SingleFileName)
	tensors, meta, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(tensors) != 26 {
		t.Errorf("got %d tensors, want 26", len(tensors))
	}
	if meta["format"] != "pt" || len(meta) != 1 {
		t.Errorf("metadata = %v, want {format: pt}", meta)
	}
	emb := tensors["model.embed_tokens.weight"]
	if emb == nil || emb.DType != "F32" || !equalInts(emb.Shape, []int{1024, 64}) {
		t.Fatalf("embed_tokens = %+v", emb)
	}
	vals, err := emb.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, v := range vals {
		sum += float64(v)
	}
	if vals[0] != 0.4322758913040161 || vals[1] != -0.3571133613586426 || vals[len(vals)-1] != -0.28408458828926086 {
		t.Errorf("embed_tokens values %v ... %v", vals[:2], vals[len(vals)-1])
	}
	if math.Abs(sum-(-92.45734187827145)) > 1e-9 {
		t.Errorf("embed_tokens sum = %.14g, want -92.45734187827145", sum)
	}
	kb := tensors["model.layers.1.self_attn.k_proj.bias"]
	if kb == nil || !equalInts(kb.Shape, []int{32}) {
		t.Fatalf("k_proj.bias = %+v", kb)
	}
	if _, ok := tensors["lm_head.weight"]; ok {
		t.Error("tied checkpoint should have no lm_head.weight")
	}

	// Open (memory-mapped) sees the same tensors.
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range tensors {
		got := f.Tensors[name]
		if got == nil || got.DType != want.DType || !equalInts(got.Shape, want.Shape) || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("Open: tensor %q differs from ReadFile", name)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// rawFile builds a safetensors file from a literal header and data section.
func rawFile(header string, data []byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

func TestParse_Errors(t *testing.T) {
	data8 := make([]byte, 8)
	tests := []struct {
		name string
		file []byte
		want string // substring of the error
	}{
		{"empty", nil, "too short"},
		{"short", []byte{1, 2, 3}, "too short"},
		{"header past end", rawFile(`{}`, nil)[:9], "exceeds"},
		{"not json", rawFile(`[1,2]   `, nil), "not a JSON object"},
		{"bad json", rawFile(`{"a":{`, nil), "header"},
		{"trailing json", rawFile(`{}{}`, nil), "trailing data"},
		{"unknown dtype", rawFile(`{"w":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}}`, data8), `tensor "w": unknown dtype "F12"`},
		{"missing dtype", rawFile(`{"w":{"shape":[2],"data_offsets":[0,8]}}`, data8), `tensor "w": missing dtype`},
		{"missing shape", rawFile(`{"w":{"dtype":"F32","data_offsets":[0,8]}}`, data8), `tensor "w": missing shape`},
		{"missing offsets", rawFile(`{"w":{"dtype":"F32","shape":[2]}}`, data8), `tensor "w": missing data_offsets`},
		{"three offsets", rawFile(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}}`, data8), `tensor "w": data_offsets`},
		{"size mismatch", rawFile(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, data8), `tensor "w": F32[3] needs 12 bytes`},
		{"negative dim", rawFile(`{"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, data8), `tensor "w": negative dimension`},
		{"reversed offsets", rawFile(`{"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, data8), `tensor "w": invalid data_offsets`},
		{"past data", rawFile(`{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, data8), `tensor "w": data_offsets [0, 16] run past`},
		{"overlap", rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data8), `tensor "b": data_offsets [4, 8] overlap tensor "a"`},
		{"gap", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data8), `tensor "a": data_offsets [4, 8] leave a gap`},
		{"trailing bytes", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, data8), "data section is 8 bytes but the tensors cover 4"},
		{"duplicate", rawFile(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, data8), `tensor "a" appears twice`},
		{"bad metadata", rawFile(`{"__metadata__":{"x":1}}`, nil), "__metadata__ must map strings to strings"},
		{"empty name", rawFile(`{"":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, data8), "empty tensor name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse("x.safetensors", tc.file)
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, "safetensors x.safetensors: ") || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line naming the file and containing %q", msg, tc.want)
			}
		})
	}
}

// Every truncation of the real fixture is an error naming the file, never a panic.
func TestReadFile_TruncatedFixture(t *testing.T) {
	full, err := os.ReadFile(filepath.Join(fixtureDir, SingleFileName))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, n := range []int{0, 7, 8, 100, 2664, 2665, len(full) / 2, len(full) - 1} {
		path := filepath.Join(dir, "cut.safetensors")
		if err := os.WriteFile(path, full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := ReadFile(path)
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("truncated to %d bytes: err = %v, want an error naming %s", n, err, path)
		}
		if _, err := Open(path); err == nil {
			t.Errorf("Open truncated to %d bytes: no error", n)
		}
	}
	// Cutting the last byte names the last tensor in the data section.
	path := filepath.Join(dir, "cut.safetensors")
	if err := os.WriteFile(path, full[:len(full)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err = ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), `tensor "model.norm.weight"`) {
		t.Errorf("err = %v, want it to name model.norm.weight", err)
	}
}

func TestReadFile_Missing(t *testing.T) {
	_, _, err := ReadFile(filepath.Join(t.TempDir(), "nope.safetensors"))
	if err == nil || !strings.Contains(err.Error(), "nope.safetensors") {
		t.Errorf("err = %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Float32sShaped restores a variable's values: present, the wanted shape, converted to float32;
// otherwise an error naming the tensor and the two shapes.
func TestFloat32sShaped(t *testing.T) {
	bf := &Tensor{Name: "w", DType: "BF16", Shape: []int{2}, Data: []byte{0x80, 0x3f, 0x00, 0xc0}} // 1, −2
	stored := map[string]*Tensor{"w": bf}
	if f, err := Float32sShaped(stored, "w", []int{2}); err != nil || len(f) != 2 || f[0] != 1 || f[1] != -2 {
		t.Errorf("Float32sShaped = %v, %v; want [1 -2]", f, err)
	}
	for _, c := range []struct {
		name string
		want []int
		msg  string
	}{{"v", []int{2}, "tensor v is missing"}, {"w", []int{1, 2}, "tensor w has shape [2], want [1 2]"}} {
		if _, err := Float32sShaped(stored, c.name, c.want); err == nil || err.Error() != c.msg {
			t.Errorf("Float32sShaped(%s, %v): err %v, want %q", c.name, c.want, err, c.msg)
		}
	}
}
