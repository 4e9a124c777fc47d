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

// A matrix product's long contraction is right to 2e-6 relative on the test backend, in both of
// the pure-Go backend's DotGeneral kernels (the small problem, 2×2 outputs over 2²² terms, and
// the blocked one, 160×160 over 2¹⁶): the exact value is the float64 sum of the same float32
// products. A language model's logits gradient flows back into its hidden state through such a
// contraction over the vocabulary (49,152 terms on SmolLM2). Before
// third_party/patches/gomlx-v0.26.0-float32-dot.patch the pure-Go kernels added the products
// into a float32 accumulator one run of 8 after another and drifted with the length: 9.2e-4 and
// 4.4e-5 here; now 3.5e-8 and 7.7e-8 (measured). The bound is xla:cpu's: its float32 GEMM
// accumulates in float32 blocks, 1.2e-6 and 8.3e-7 here, an error that does not grow with the
// length the way one running sum's does.
func TestMatMul_LongContractionIsExact(t *testing.T) {
	for _, c := range []struct{ m, k, n int }{{2, 1 << 22, 2}, {160, 1 << 16, 160}} {
		lhs, rhs := make([]float32, c.m*c.k), make([]float32, c.k*c.n)
		for i := range lhs {
			lhs[i] = float32(0.01 * float64(1+i%7))
		}
		for i := range rhs {
			rhs[i] = float32(0.1 * float64(1+i%5))
		}
		e, err := NewExec(testBackend(), func(a, b *Node) *Node { return MatMul(a, b) })
		if err != nil {
			t.Fatal(err)
		}
		outs, err := e.Exec(tensors.FromFlatDataAndDimensions(lhs, c.m, c.k), tensors.FromFlatDataAndDimensions(rhs, c.k, c.n))
		e.Finalize()
		if err != nil {
			t.Fatal(err)
		}
		got := outs[0].Value().([][]float32)
		worst := 0.0
		for i := range c.m {
			for j := range c.n {
				want := 0.0
				for k := range c.k {
					want += float64(lhs[i*c.k+k] * rhs[k*c.n+j])
				}
				worst = max(worst, math.Abs(float64(got[i][j])-want)/want)
			}
		}
		t.Logf("[%d,%d]×[%d,%d] on %s: worst relative error %.2g", c.m, c.k, c.k, c.n, testBackend().Name(), worst)
		if !(worst <= 2e-6) {
			t.Errorf("[%d,%d]×[%d,%d]: worst relative error %.2g against the float64 sum of the same products > 2e-6", c.m, c.k, c.k, c.n, worst)
		}
	}
}
