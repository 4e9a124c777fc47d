package safetensors

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, and that what it accepts survives a
// write → read round trip. `go test` runs the seeds; `go test -fuzz=FuzzParse` explores.
func FuzzParse(f *testing.F) {
	fixture, err := os.ReadFile(filepath.Join(fixtureDir, SingleFileName))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(fixture[:4096])
	f.Add(rawFile(`{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"F16","shape":[],"data_offsets":[4,6]}}`, make([]byte, 6)))
	f.Add(rawFile(`{"a":{"dtype":"I64","shape":[1,0],"data_offsets":[0,0]}}`, nil))
	f.Add([]byte{255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, b []byte) {
		tensors, meta, err := Parse("fuzz", b)
		if err != nil {
			return
		}
		var list []*Tensor
		for _, tt := range tensors {
			list = append(list, tt)
			_, _ = tt.Float32s()
		}
		path := filepath.Join(t.TempDir(), "x.safetensors")
		if err := WriteFile(path, list, meta); err != nil {
			t.Fatalf("accepted input does not write back: %v", err)
		}
		again, _, err := ReadFile(path)
		if err != nil {
			t.Fatalf("written file does not read back: %v", err)
		}
		checkSame(t, again, list)
	})
}
