package gguf

import (
	"os"
	"testing"
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
