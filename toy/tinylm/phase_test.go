package tinylm

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every phase prints the course's lines byte for byte (testdata/phaseNN.txt, copied from the
// course's expected output).
func TestPhases_PrintExpectedLines(t *testing.T) {
	phases := []struct {
		file string
		run  func(io.Writer) error
	}{
		{"phase08.txt", Phase8},
		{"phase09.txt", Phase9},
		{"phase10.txt", Phase10},
		{"phase11.txt", Phase11},
		{"phase12.txt", Phase12},
	}
	for _, p := range phases {
		t.Run(p.file, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("testdata", p.file))
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := p.run(&got); err != nil {
				t.Fatal(err)
			}
			if got.String() != string(want) {
				gl, wl := strings.Split(got.String(), "\n"), strings.Split(string(want), "\n")
				for i := range max(len(gl), len(wl)) {
					g, w := at(gl, i), at(wl, i)
					if g != w {
						t.Errorf("line %d:\n got %q\nwant %q", i+1, g, w)
					}
				}
			}
		})
	}
}

func at(xs []string, i int) string {
	if i < len(xs) {
		return xs[i]
	}
	return "<missing>"
}
