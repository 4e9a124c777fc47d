// Package graphtest evaluates small GoMLX graphs for the trainers' loss tests: one shared backend,
// outputs read back as flat float64s, failures reported through testing.TB.
package graphtest

import (
	"math"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// Backend is the default backend, created once per test binary.
var Backend = sync.OnceValue(func() backends.Backend { return backend.MustNewForTests() })

// Compile compiles fn once and returns a runner that evaluates it on inputs (tensors or Go
// slices/scalars), returning every output as flat float64s. Errors fail the test.
func Compile(t testing.TB, fn func(in []*graph.Node) []*graph.Node) func(inputs ...any) [][]float64 {
	t.Helper()
	e, err := step.NewEval(Backend(), fn)
	if err != nil {
		t.Fatal(err)
	}
	return func(inputs ...any) [][]float64 {
		t.Helper()
		outs, err := e.Run(inputs...)
		if err != nil {
			t.Fatal(err)
		}
		res := make([][]float64, len(outs))
		for i, o := range outs {
			res[i] = step.Float64s(o)
		}
		return res
	}
}

// Eval compiles fn and evaluates it once on inputs, returning every output as flat float64s.
func Eval(t testing.TB, fn func(in []*graph.Node) []*graph.Node, inputs ...any) [][]float64 {
	t.Helper()
	return Compile(t, fn)(inputs...)
}

// Within reports whether |got − want| ≤ tol.
func Within(got, want, tol float64) bool { return math.Abs(got-want) <= tol }
