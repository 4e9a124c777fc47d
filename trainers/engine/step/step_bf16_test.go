package step

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// bf16Grad returns n bf16 values ±{0.5, 1, 1.5, 2} and Σ v² in float64. Every square is a multiple
// of 1/4 and the sum stays below 2¹⁸, so a float32 running sum of them is exact, while a bf16 one
// (8 significant bits) stops growing near 2⁹–2¹⁰.
func bf16Grad(n int) (*tensors.Tensor, float64) {
	vals := make([]bfloat16.BFloat16, n)
	sumSq := 0.0
	for i := range vals {
		x := 0.5 * float64(1+(i*7)%4)
		if (i*13)%5 < 2 {
			x = -x
		}
		vals[i] = bfloat16.FromFloat64(x)
		v := float64(vals[i].Float32())
		sumSq += v * v
	}
	return tensors.FromFlatDataAndDimensions(vals, 256, n/256), sumSq
}

// GlobalNorm of a 2¹⁶-element bf16 gradient equals the float64 norm of the same bf16 values to
// float32 precision, in either requested dtype; a float32 gradient beside it adds its ‖g‖².
// Reducing Σ g² in bf16 (the old code) gives a norm about 10× too small.
func TestGlobalNorm_BFloat16SumsInFloat32(t *testing.T) {
	grad, sumSq := bf16Grad(1 << 16)
	f32 := []float32{3, 4}
	want := math.Sqrt(sumSq + 25)
	for _, dtype := range []dtypes.DType{dtypes.Float32, dtypes.Float64} {
		e, err := NewExec(testBackend(), func(g, h *Node) *Node {
			return GlobalNorm([]*Node{g, h}, dtype)
		})
		if err != nil {
			t.Fatal(err)
		}
		outs, err := e.Exec(grad, f32)
		e.Finalize()
		if err != nil {
			t.Fatal(err)
		}
		if outs[0].DType() != dtype {
			t.Errorf("%s: norm dtype = %s, want %s", dtype, outs[0].DType(), dtype)
		}
		if got := ScalarValue(outs[0]); math.Abs(got-want) > 1e-6*want {
			t.Errorf("%s: GlobalNorm = %v, want %v (float64 norm of the bf16 values), rel. error %.2g",
				dtype, got, want, math.Abs(got-want)/want)
		}
	}
}

// float64 gradients keep float64: the norm is exact to float64 rounding, which a float32
// reduction (rel. error ~1e-8 here) would miss.
func TestGlobalNorm_Float64StaysFloat64(t *testing.T) {
	g := []float64{1 + 1e-12, 2, 2}
	want := math.Sqrt(g[0]*g[0] + 8)
	e, err := NewExec(testBackend(), func(x *Node) *Node { return GlobalNorm([]*Node{x}, dtypes.Float64) })
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	outs, err := e.Exec(g)
	if err != nil {
		t.Fatal(err)
	}
	if got := ScalarValue(outs[0]); math.Abs(got-want) > 1e-15*want {
		t.Errorf("GlobalNorm = %.17g, want %.17g", got, want)
	}
}
