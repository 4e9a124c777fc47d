package backend

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// In simplego's parallel execution, the users of one intermediate run at once, and the last to
// finish may take the buffer over and write its result into it. It read the count of the other
// users' finishes without the lock they write it under, so nothing ordered their reads of the
// buffer before its writes (third_party/patches/gomlx-v0.26.0-simplego-uses-read-under-lock.patch).
// This graph fans one intermediate out to ops that reuse their input in place; the results must
// be right, and `go test -race` (make race-check) must see no race.
func TestPureGo_ParallelUsersOfOneBuffer(t *testing.T) {
	b := MustNew(PureGo + ",ops_parallel")
	defer b.Finalize()
	const n = 1 << 16
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%1000) / 1000
	}
	exec, err := graph.NewExec(b, func(x *graph.Node) []*graph.Node {
		y := graph.AddScalar(x, 1) // an intermediate the executor owns, with four users
		return []*graph.Node{graph.Sin(y), graph.Cos(y), graph.Neg(y), graph.Reshape(y, n/2, 2)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	for range 50 {
		out, err := exec.Exec(x)
		if err != nil {
			t.Fatal(err)
		}
		sin, cos := tensors.MustCopyFlatData[float32](out[0]), tensors.MustCopyFlatData[float32](out[1])
		neg, flat := tensors.MustCopyFlatData[float32](out[2]), tensors.MustCopyFlatData[float32](out[3])
		for i := 0; i < n; i += 997 {
			y := float64(x[i]) + 1
			if math.Abs(float64(sin[i])-math.Sin(y)) > 1e-6 || math.Abs(float64(cos[i])-math.Cos(y)) > 1e-6 || float64(neg[i]) != -float64(float32(y)) || flat[i] != float32(y) {
				t.Fatalf("element %d: sin %g cos %g neg %g reshape %g, want those of %g", i, sin[i], cos[i], neg[i], flat[i], y)
			}
		}
	}
}
