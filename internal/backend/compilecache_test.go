//go:build !noxla

package backend

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// An XLA backend is one client per configuration in the process, and a program it compiled once
// is not compiled again (third_party patch gomlx-v0.26.0-xla-executable-cache): a second Exec of the
// same graph, after the first was finalized, is answered from the cache with the same results; a
// different program is compiled anew. The XLA pass of `make test` took 214 s for trainers/grpo
// without the cache and 88 s with it (third_party/README.md).
func TestXLA_SameProgramCompilesOnce(t *testing.T) {
	needCPUPlugin(t)
	b := MustNew(DefaultCPU)
	if again := MustNew(DefaultCPU); again != b {
		t.Fatalf("New(%q) made a second client", DefaultCPU)
	}
	run := func(scale float32) (float32, int) {
		t.Helper()
		hits := CompileCacheHits(b)
		exec, err := graph.NewExec(b, func(x *graph.Node) *graph.Node {
			return graph.ReduceAllSum(graph.AddScalar(graph.MulScalar(x, float64(scale)), 1))
		})
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Finalize()
		out, err := exec.Exec([]float32{1, 2, 3})
		if err != nil {
			t.Fatal(err)
		}
		return out[0].Value().(float32), CompileCacheHits(b) - hits
	}
	if got, hits := run(2); got != 15 || hits != 0 {
		t.Fatalf("first run: %v with %d cache hits, want 15 with 0", got, hits)
	}
	if got, hits := run(2); got != 15 || hits != 1 {
		t.Errorf("the same program again: %v with %d cache hits, want 15 with 1", got, hits)
	}
	if got, hits := run(3); got != 21 || hits != 0 {
		t.Errorf("another program: %v with %d cache hits, want 21 with 0", got, hits)
	}
	// The shared client outlives a caller's Finalize.
	b.Finalize()
	if got, hits := run(2); got != 15 || hits != 1 {
		t.Errorf("after Finalize: %v with %d cache hits, want 15 with 1", got, hits)
	}
}
