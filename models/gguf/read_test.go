package gguf

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

func parseBytes(data []byte) (*File, error) { return Parse(bytes.NewReader(data), int64(len(data))) }

func smallFile() *builder {
	return newBuilder().str("general.architecture", "llama").u32("llama.block_count", 2).
		strs("tokenizer.ggml.tokens", []string{"a", "", "Ġb"}).i32s("tokenizer.ggml.token_type", []int32{1, 3, -2}).
		f32Tensor("a", []int64{4, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8}).
		f32Tensor("b", []int64{3}, []float32{-1, 0, 1})
}

func TestParse_Small(t *testing.T) {
	f, err := parseBytes(smallFile().bytes())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := f.Int("llama.block_count"); err != nil || n != 2 {
		t.Errorf("block_count = %d, %v", n, err)
	}
	if toks, err := f.Strings("tokenizer.ggml.tokens"); err != nil || len(toks) != 3 || toks[2] != "Ġb" {
		t.Errorf("tokens = %q, %v", toks, err)
	}
	if tt, err := f.Ints("tokenizer.ggml.token_type"); err != nil || len(tt) != 3 || tt[2] != -2 {
		t.Errorf("token_type = %v, %v", tt, err)
	}
	if _, err := f.Strings("tokenizer.ggml.token_type"); err == nil {
		t.Error("an int32 array read as strings")
	}
	a, _ := f.Tensor("a")
	got, err := f.Float32(a)
	if err != nil || got[5] != 6 || len(got) != 8 {
		t.Errorf("a = %v, %v", got, err)
	}
	if s := a.Shape(); s[0] != 2 || s[1] != 4 {
		t.Errorf("shape %v, want [2 4]", s)
	}
	b, _ := f.Tensor("b")
	if b.Offset%DefaultAlignment != 0 || b.Offset == 0 {
		t.Errorf("b offset %d not aligned", b.Offset)
	}
}

// TestParse_EveryTruncationIsAnError: each prefix of the golden file that ends before its last
// tensor's data fails with one line that names an offset, and never panics (every prefix through
// the header and the first data bytes, then every 61st).
func TestParse_EveryTruncationIsAnError(t *testing.T) {
	data, err := os.ReadFile("testdata/types.gguf")
	if err != nil {
		t.Fatal(err)
	}
	full, err := parseBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	end := full.DataOffset
	for _, ti := range full.Tensors {
		end = max(end, full.DataOffset+ti.Offset+ti.Bytes())
	}
	for n := 0; n < int(end); n++ {
		if n > int(full.DataOffset)+64 && n%61 != 0 {
			continue
		}
		_, err := parseBytes(data[:n])
		if err == nil {
			t.Fatalf("prefix of %d bytes parsed", n)
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, "offset") {
			t.Fatalf("prefix of %d bytes: %q is not one line naming an offset", n, msg)
		}
	}
}

func TestParse_Errors(t *testing.T) {
	u64 := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	u32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"magic", []byte("GGML\x03\x00\x00\x00"), `magic at offset 0: "GGML" is not "GGUF"`},
		{"version 1", func() []byte { b := newBuilder(); b.version = 1; return b.bytes() }(), "version at offset 4: 1 is not supported"},
		{"big-endian", func() []byte { b := newBuilder(); b.version = 3 << 24; return b.bytes() }(), "big-endian"},
		{"tensor count", cat([]byte(Magic), u32(3), u64(1<<40), u64(0)), "tensor_count at offset 8: 1099511627776 entries cannot fit"},
		{"kv count", cat([]byte(Magic), u32(3), u64(0), u64(1<<62)), "kv_count at offset 16"},
		{"key length", cat([]byte(Magic), u32(3), u64(0), u64(1), u64(1<<50), make([]byte, 16)), "metadata key 0 at offset 24: length 1125899906842624 is past the end"},
		{"value type", newBuilder().kv("k", 13, []byte{0}).bytes(), `metadata "k" (key 0 at offset 24) at offset 33: unknown value type 13`},
		{"array type", newBuilder().kv("k", TypeArray, cat(u32(42), u64(0))).bytes(), "unknown array element type 42"},
		{"array length", newBuilder().kv("k", TypeArray, cat(u32(uint32(TypeUint64)), u64(1<<40))).bytes(), "array of 1099511627776 uint64 cannot fit"},
		{"string in array", newBuilder().kv("k", TypeArray, cat(u32(uint32(TypeString)), u64(1), u64(99))).bytes(), "length 99 is past the end"},
		{"nesting", newBuilder().kv("k", TypeArray, bytes.Repeat(cat(u32(uint32(TypeArray)), u64(1)), 20)).bytes(), "nested more than 8 deep"},
		{"duplicate key", newBuilder().u32("k", 1).u32("k", 2).bytes(), `metadata key 1 "k": duplicate key`},
		{"alignment type", newBuilder().f32("general.alignment", 32).bytes(), "general.alignment is float32, not uint32"},
		{"alignment value", newBuilder().u32("general.alignment", 48).bytes(), "general.alignment is 48, not a power of two"},
		{"ggml type", newBuilder().tensor("w", 99, []int64{1}, []byte{0}).bytes(), `tensor 0 "w" (info at offset 24): unknown ggml type 99 at offset`},
		{"dims", newBuilder().tensor("w", F32, []int64{1, 1, 1, 1, 1}, make([]byte, 4)).bytes(), "5 dimensions, ggml allows at most 4"},
		{"negative ne", newBuilder().tensor("w", F32, []int64{-1}, nil).bytes(), "dimension 0 has 18446744073709551615 elements"},
		{"overflow", newBuilder().tensor("w", F32, []int64{1 << 40, 1 << 40}, nil).bytes(), "more than 2^63 elements"},
		{"block", newBuilder().tensor("w", Q8_0, []int64{31}, make([]byte, 34)).bytes(), "row length 31 is not a multiple of Q8_0's block of 32"},
		{"past end", newBuilder().tensor("w", F32, []int64{100}, make([]byte, 8)).bytes(), `tensor "w" (info at offset 24): data [0, 400) at file offset 64 is past the end`},
		{"duplicate tensor", newBuilder().f32Tensor("w", []int64{1}, []float32{1}).f32Tensor("w", []int64{1}, []float32{1}).bytes(), "duplicate name"},
		{"name length", newBuilder().f32Tensor(strings.Repeat("n", 64), []int64{1}, []float32{1}).bytes(), "name is 64 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseBytes(tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v, want one line containing %q", err, tc.want)
			}
		})
	}
}

func TestParse_MisalignedOffset(t *testing.T) {
	b := newBuilder()
	b.tensor("w", F32, []int64{1}, make([]byte, 40))
	data := b.bytes()
	// Patch the tensor's offset (the info's last 8 bytes, right before the padding) to 4.
	end := 24 + 8 + 1 + 4 + 8 + 4 + 8
	binary.LittleEndian.PutUint64(data[end-8:], 4)
	if _, err := parseBytes(data); err == nil || !strings.Contains(err.Error(), "data offset 4 is not a multiple of the alignment 32") {
		t.Errorf("got %v", err)
	}
}

func TestDequantize_Errors(t *testing.T) {
	if _, err := Dequantize(Q2_K, make([]byte, 84), 256); err == nil || !strings.Contains(err.Error(), "dequantising Q2_K is not supported") {
		t.Errorf("Q2_K: %v", err)
	}
	if _, err := Dequantize(Q8_0, make([]byte, 33), 32); err == nil || !strings.Contains(err.Error(), "need 34 bytes, got 33") {
		t.Errorf("short: %v", err)
	}
	if _, err := Dequantize(Q4_K, make([]byte, 144), 100); err == nil {
		t.Error("partial block accepted")
	}
}

// Tensor data that overlaps another's or is out of order is refused, as llama.cpp refuses it.
func TestParse_TensorDataInOrderWithoutOverlap(t *testing.T) {
	zeros := make([]float32, 8) // 32 bytes: each tensor's data fills its aligned slot
	data := newBuilder().f32Tensor("a", []int64{8}, zeros).f32Tensor("b", []int64{8}, zeros).f32Tensor("c", []int64{8}, zeros).bytes()
	f, err := parseBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	offsetField := func(i int) int64 { // where tensor i's u64 data offset is
		x := f.Tensors[i]
		return x.InfoOffset + 8 + int64(len(x.Name)) + 4 + 8*int64(len(x.Dims)) + 4
	}
	for _, c := range []struct {
		name string
		offs map[int]uint64
		want string
	}{
		{"c over a", map[int]uint64{2: 0}, `tensor "c" (info at offset %d): data offset 0, expected 64`},
		{"b and c swapped", map[int]uint64{1: 64, 2: 32}, `tensor "b" (info at offset %d): data offset 64, expected 32`},
	} {
		bad := slices.Clone(data)
		who := 0
		for i, off := range c.offs {
			binary.LittleEndian.PutUint64(bad[offsetField(i):], off)
			if who == 0 || i < who {
				who = i
			}
		}
		want := fmt.Sprintf(c.want, f.Tensors[who].InfoOffset)
		if _, err := parseBytes(bad); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", c.name, err, want)
		}
	}
}
