package step

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// The global gradient norm of a 10⁸-element float32 gradient (a Qwen2.5-0.5B embedding is
// 1.36·10⁸) beside a small one is right to 1e-6 relative on the test backend: the exact norm is
// the float64 sum of the same float32 values' squares. The values are 0.01·(1 + i mod 7), so
// every square is small against the running sum: a float32 accumulator adding them one after
// another stops growing once its unit in the last place passes twice the largest square (near
// 2¹⁸ here): the pure-Go backend's ReduceSum did so before
// third_party/patches/gomlx-v0.26.0-float-sums.patch and read this norm 19% low (362.272 for
// 447.402; measured). XLA reduces in trees: 6.8e-8 on xla:cpu.
func TestGlobalNorm_LongFloat32SumIsExact(t *testing.T) {
	const rows, cols = 12_500, 8_000 // 10⁸ elements
	big := make([]float32, rows*cols)
	sumSq := 0.0
	for i := range big {
		big[i] = float32(0.01 * float64(1+i%7))
		if i%3 == 0 {
			big[i] = -big[i]
		}
		v := float64(big[i])
		sumSq += v * v
	}
	small := []float32{3, -4, 12}
	want := math.Sqrt(sumSq + 9 + 16 + 144)
	e, err := NewExec(testBackend(), func(g, h *Node) *Node { return GlobalNorm([]*Node{g, h}, dtypes.Float32) })
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	outs, err := e.Exec(tensors.FromFlatDataAndDimensions(big, rows, cols), small)
	if err != nil {
		t.Fatal(err)
	}
	got := ScalarValue(outs[0])
	rel := math.Abs(got-want) / want
	t.Logf("GlobalNorm over %d elements on %s = %.9g, float64 %.9g, relative error %.2g", rows*cols+3, testBackend().Name(), got, want, rel)
	if !(rel <= 1e-6) {
		t.Errorf("GlobalNorm = %.9g, want %.9g (the float64 norm of the same values): relative error %.2g > 1e-6", got, want, rel)
	}
}
