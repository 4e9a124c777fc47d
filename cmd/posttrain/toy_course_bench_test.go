package main

import (
	"io"
	"testing"

	"github.com/posttrain/posttrain/toy/tinylm"
)

// BenchmarkToyCourse measures the wall time of `posttrain toy course` (all 74 lines of phases
// 1-12) as the CLI runs it — phases 8-12 trained through the GoMLX trainer path — side by side
// with the same course where phases 8-12 run on the float64 oracle (toy/tinylm). Phases 1-7 are
// float64 in both. Run with `make bench`; the ratio of the two is the cost of the graph path.
func BenchmarkToyCourse(b *testing.B) {
	b.Run("gomlx", func(b *testing.B) {
		for range b.N {
			if err := runCourse(io.Discard); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("float64", func(b *testing.B) {
		oracle := []func(io.Writer) error{tinylm.Phase8, tinylm.Phase9, tinylm.Phase10, tinylm.Phase11, tinylm.Phase12}
		for range b.N {
			for _, e := range sortedToys() {
				if e.Phase <= 7 && e.Course != nil {
					if err := e.Course(io.Discard); err != nil {
						b.Fatal(err)
					}
				}
			}
			for _, phase := range oracle {
				if err := phase(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
