package decoder

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
)

// On the pure-Go backend a product of few rows against a large out is split into direct-kernel
// slices (matmulT); its value and its gradients are those of the plain DotGeneral.
func TestMatmulT_SplitEqualsDotGeneral(t *testing.T) {
	const rows, out, in = 2, 10240, 24 // rows·out = 20480 > simplego's direct limit 16·32²
	rng := rand.New(rand.NewPCG(1, 2))
	xT, wT := randnTensor(rng, 1, rows, in), randnTensor(rng, 1, out, in)
	b := backend.SharedForTests()
	pureGoOnly(t, b, "split products (matmulT)")
	var split int
	exec, err := NewExec(b, func(x, w *Node) []*Node {
		w = Reshape(w, out, in)
		split = directSplit(x, rows, out)
		got := matmulT(x, w)                                              // [1,rows,out]
		want := DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{1}, nil) // [1,rows,out]
		weights := Sin(Iota(x.Graph(), got.Shape(), 2))                   // a loss that weighs every output differently
		gGot := Gradient(ReduceAllSum(Mul(got, weights)), x, w)
		gWant := Gradient(ReduceAllSum(Mul(want, weights)), x, w)
		return []*Node{got, want, gGot[0], gWant[0], gGot[1], gWant[1]}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Exec(xT, wT)
	if err != nil {
		t.Fatal(err)
	}
	if split < 2 {
		t.Fatalf("directSplit = %d: the test does not reach the split path", split)
	}
	for i, name := range []string{"x·wᵀ", "d/dx", "d/dw"} {
		got, want := tensors.MustCopyFlatData[float32](res[2*i]), tensors.MustCopyFlatData[float32](res[2*i+1])
		for j := range want {
			if d := math.Abs(float64(got[j] - want[j])); d > 1e-4*(1+math.Abs(float64(want[j]))) {
				t.Fatalf("%s[%d]: split %g, DotGeneral %g", name, j, got[j], want[j])
			}
		}
	}
}

// randnTensor is a float32 tensor of dims drawn from N(0, 1) with rng.
func randnTensor(rng *rand.Rand, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return tensors.FromFlatDataAndDimensions(x, dims...)
}
