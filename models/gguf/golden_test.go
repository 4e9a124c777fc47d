package gguf

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// golden is testdata/expected.json, written by scripts/reference/gguf_golden.py (gguf-py 0.19.0).
type golden struct {
	GGUFPy    string `json:"gguf_py"`
	Alignment int64  `json:"alignment"`
	Tensors   []struct {
		Name   string  `json:"name"`
		Type   string  `json:"type"`
		NE     []int64 `json:"ne"`
		Offset int     `json:"offset"`
		Count  int     `json:"count"`
		SHA256 string  `json:"sha256"`
	} `json:"tensors"`
	Metadata []struct {
		Key     string `json:"key"`
		Type    string `json:"type"`
		SubType string `json:"sub_type"`
		Value   any    `json:"value"`
	} `json:"metadata"`
}

func readGolden(t *testing.T) (*golden, []float32) {
	t.Helper()
	data, err := os.ReadFile("testdata/expected.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&g); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("testdata/expected.f32")
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, len(raw)/4)
	for i := range want {
		want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return &g, want
}

// TestDequantize_MatchesGGUFPy: every tensor of testdata/types.gguf dequantises to gguf-py's
// float32 values bit for bit. Tolerance 0: each value is an f16 scale times a small integer, plus
// at most one f16 offset, evaluated in float32 in the same order by ggml-quants.c, gguf-py's numpy
// and this package, so there is exactly one correctly rounded answer.
func TestDequantize_MatchesGGUFPy(t *testing.T) {
	g, want := readGolden(t)
	f, err := Open("testdata/types.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Tensors) != len(g.Tensors) {
		t.Fatalf("got %d tensors, want %d", len(f.Tensors), len(g.Tensors))
	}
	seen := map[string]bool{}
	for _, gt := range g.Tensors {
		ti, ok := f.Tensor(gt.Name)
		if !ok {
			t.Fatalf("tensor %s missing", gt.Name)
		}
		if ti.Type.String() != gt.Type || !slices.Equal(ti.Dims, gt.NE) {
			t.Errorf("%s: got %s %v, want %s %v", gt.Name, ti.Type, ti.Dims, gt.Type, gt.NE)
		}
		got, err := f.Float32(ti)
		if err != nil {
			t.Fatal(err)
		}
		exp := want[gt.Offset : gt.Offset+gt.Count]
		bad := 0
		for i := range exp {
			if math.Float32bits(got[i]) != math.Float32bits(exp[i]) {
				if bad < 3 {
					t.Errorf("%s[%d]: got %g (%#08x), want %g (%#08x)", gt.Name, i, got[i], math.Float32bits(got[i]), exp[i], math.Float32bits(exp[i]))
				}
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", gt.Name, bad, len(exp))
		}
		sum := sha256.New()
		binary.Write(sum, binary.LittleEndian, got)
		if h := hex.EncodeToString(sum.Sum(nil)); h != gt.SHA256 {
			t.Errorf("%s: sha256 %s, want %s", gt.Name, h, gt.SHA256)
		}
		seen[gt.Type] = true
	}
	for _, typ := range []Type{F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K} {
		if !seen[typ.String()] {
			t.Errorf("the golden file has no %s tensor", typ)
		}
	}
}

// TestParse_GoldenMetadata: the metadata gguf-py wrote, every value type and a nested array.
func TestParse_GoldenMetadata(t *testing.T) {
	g, _ := readGolden(t)
	f, err := Open("testdata/types.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Version != 3 || f.Alignment != g.Alignment || f.DataOffset%g.Alignment != 0 {
		t.Errorf("version %d alignment %d data offset %d; want 3, %d, aligned", f.Version, f.Alignment, f.DataOffset, g.Alignment)
	}
	if arch, err := f.String("general.architecture"); err != nil || arch != "test" {
		t.Errorf("general.architecture = %q, %v", arch, err)
	}
	for _, m := range g.Metadata {
		kv, ok := f.Get(m.Key)
		if !ok {
			t.Errorf("%s missing", m.Key)
			continue
		}
		if !strings.EqualFold(kv.Type.String(), m.Type) {
			t.Errorf("%s: type %s, want %s", m.Key, kv.Type, m.Type)
		}
		if got, want := render(kv.Value), renderJSON(m.Value); got != want {
			t.Errorf("%s: got %s, want %s", m.Key, got, want)
		}
	}
}

// render and renderJSON spell a value the same way on both sides: numbers as the shortest
// decimal that round-trips (float32 through float64, as Python holds it), arrays in brackets.
func render(v any) string {
	switch v := v.(type) {
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 64)
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	case string:
		return strconv.Quote(v)
	case Array:
		parts := make([]string, len(v.Values))
		for i, e := range v.Values {
			parts[i] = render(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v)
}

func renderJSON(v any) string {
	switch v := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if u, err := strconv.ParseUint(string(v), 10, 64); err == nil {
			return strconv.FormatUint(u, 10)
		}
		x, _ := strconv.ParseFloat(string(v), 64)
		return strconv.FormatFloat(x, 'g', -1, 64)
	case string:
		return strconv.Quote(v)
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = renderJSON(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	return fmt.Sprint(v)
}
