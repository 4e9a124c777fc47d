package gomlxfix

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
)

func newBackend(t *testing.T) backends.Backend {
	t.Helper()
	b, err := backend.New(backend.ForTests())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

func randTensor(rng *rand.Rand, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	data := make([]float64, n)
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	return tensors.FromFlatDataAndDimensions(data, dims...)
}

func execN(b backends.Backend, fn func(a, b, c *Node) []*Node, args ...any) ([]*tensors.Tensor, error) {
	e, err := NewExec(b, fn)
	if err != nil {
		return nil, err
	}
	defer e.Finalize()
	return e.Exec(args...)
}

// withVJP runs fn with VJPRegistration[nt] temporarily set to vjp.
func withVJP(nt NodeType, vjp VJP, fn func()) {
	saved := VJPRegistration[nt]
	VJPRegistration[nt] = vjp
	defer func() { VJPRegistration[nt] = saved }()
	fn()
}

func maxAbsDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// dotGrads returns d/dlhs and d/drhs of sum(w ⊙ DotGeneral(lhs, rhs)) for one axis layout.
func dotGrads(t *testing.T, b backends.Backend, lc, lb, rc, rb []int, lhs, rhs, w *tensors.Tensor) [][]float64 {
	t.Helper()
	outs, err := execN(b, func(lhs, rhs, w *Node) []*Node {
		out := DotGeneral(lhs, lc, lb, rhs, rc, rb)
		return Gradient(ReduceAllSum(Mul(out, w)), lhs, rhs)
	}, lhs, rhs, w)
	if err != nil {
		t.Fatal(err)
	}
	return [][]float64{tensors.MustCopyFlatData[float64](outs[0]), tensors.MustCopyFlatData[float64](outs[1])}
}

func TestDotGeneralVJP_EqualsStock(t *testing.T) {
	Install()
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		name           string
		lhs, rhs, out  []int
		lc, lb, rc, rb []int
	}{
		{"matmul", []int{3, 4}, []int{4, 5}, []int{3, 5}, []int{1}, nil, []int{0}, nil},
		{"linear [out,in]", []int{2, 3, 4}, []int{5, 4}, []int{2, 3, 5}, []int{2}, nil, []int{1}, nil},
		{"batched", []int{2, 3, 4}, []int{2, 4, 5}, []int{2, 3, 5}, []int{2}, []int{0}, []int{1}, []int{0}},
		{"batch not leading, two contracting", []int{3, 2, 4, 5}, []int{5, 4, 2, 6}, []int{2, 3, 6}, []int{3, 2}, []int{1}, []int{0, 1}, []int{2}},
		{"contracting pairs in reverse order", []int{4, 5, 3}, []int{6, 5, 4}, []int{3, 6}, []int{0, 1}, nil, []int{2, 1}, nil},
		{"two batch axes, matrix-vector", []int{2, 3, 4, 5}, []int{3, 2, 5}, []int{2, 3, 4}, []int{3}, []int{0, 1}, []int{2}, []int{1, 0}},
		{"outer product", []int{3}, []int{4}, []int{3, 4}, nil, nil, nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			lhs, rhs, w := randTensor(rng, c.lhs...), randTensor(rng, c.rhs...), randTensor(rng, c.out...)
			var want, got [][]float64
			withVJP(NodeTypeDotGeneral, stockDotGeneralVJP, func() { want = dotGrads(t, b, c.lc, c.lb, c.rc, c.rb, lhs, rhs, w) })
			withVJP(NodeTypeDotGeneral, DotGeneralVJP, func() { got = dotGrads(t, b, c.lc, c.lb, c.rc, c.rb, lhs, rhs, w) })
			for i := range want {
				if d := maxAbsDiff(got[i], want[i]); d > 1e-12 {
					t.Errorf("operand %d: max |patched - stock| = %g", i, d)
				}
			}
		})
	}
}

// The GQA attention einsums go through DotGeneral with batch axes and transposes.
func TestDotGeneralVJP_EinsumEqualsStock(t *testing.T) {
	Install()
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(3, 4))
	q, k, w := randTensor(rng, 2, 3, 2, 2, 4), randTensor(rng, 2, 5, 2, 4), randTensor(rng, 2, 2, 2, 3, 5)
	grads := func() [][]float64 {
		outs, err := execN(b, func(q, k, w *Node) []*Node {
			s := Einsum("bqkgd,bskd->bkgqs", q, k)
			return Gradient(ReduceAllSum(Mul(s, w)), q, k)
		}, q, k, w)
		if err != nil {
			t.Fatal(err)
		}
		return [][]float64{tensors.MustCopyFlatData[float64](outs[0]), tensors.MustCopyFlatData[float64](outs[1])}
	}
	var want, got [][]float64
	withVJP(NodeTypeDotGeneral, stockDotGeneralVJP, func() { want = grads() })
	withVJP(NodeTypeDotGeneral, DotGeneralVJP, func() { got = grads() })
	for i := range want {
		if d := maxAbsDiff(got[i], want[i]); d > 1e-12 {
			t.Errorf("operand %d: max |patched - stock| = %g", i, d)
		}
	}
}

func TestRsqrtVJP_FiniteDifferences(t *testing.T) {
	Install()
	b := newBackend(t)
	xs := []float64{0.3, 1, 2.5, 7}
	out, err := ExecOnce(b, func(x *Node) *Node {
		return Gradient(ReduceAllSum(Rsqrt(x)), x)[0]
	}, tensors.FromFlatDataAndDimensions(xs, len(xs)))
	if err != nil {
		t.Fatal(err)
	}
	got := tensors.MustCopyFlatData[float64](out)
	const h = 1e-6
	for i, x := range xs {
		want := (1/math.Sqrt(x+h) - 1/math.Sqrt(x-h)) / (2 * h)
		if math.Abs(got[i]-want) > 1e-7*math.Max(1, math.Abs(want)) {
			t.Errorf("d/dx x^-1/2 at %g: got %g, want %g", x, got[i], want)
		}
	}
}

// The stock Slice gradient needs Pad, which the pure-Go backend lacks; the patched one places the
// incoming gradient back where the slice came from.
func TestSliceVJP_PlacesGradient(t *testing.T) {
	Install()
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(5, 6))
	x, w := randTensor(rng, 3, 5, 4), randTensor(rng, 2, 3, 4)
	out, err := ExecOnce(b, func(x, w *Node) *Node {
		s := Slice(x, AxisRange(1, 3), AxisRange(1, 4), AxisRange())
		return Gradient(ReduceAllSum(Mul(s, w)), x)[0]
	}, x, w)
	if err != nil {
		t.Fatal(err)
	}
	got := tensors.MustCopyFlatData[float64](out)
	wf := tensors.MustCopyFlatData[float64](w)
	for i := range 3 {
		for j := range 5 {
			for k := range 4 {
				want := 0.0
				if i >= 1 && j >= 1 && j < 4 {
					want = wf[((i-1)*3+(j-1))*4+k]
				}
				if g := got[(i*5+j)*4+k]; g != want {
					t.Fatalf("grad[%d,%d,%d] = %g, want %g", i, j, k, g, want)
				}
			}
		}
	}
}

func TestInstall_Idempotent(t *testing.T) {
	Install()
	Install()
	if stockDotGeneralVJP == nil || stockSlice == nil {
		t.Fatal("stock VJPs not saved")
	}
	if VJPRegistration[NodeTypeRsqrt] == nil {
		t.Fatal("Rsqrt VJP not registered")
	}
}

func TestCall_ReturnsGraphPanicAsError(t *testing.T) {
	b := newBackend(t)
	err := Call(func() {
		_ = MustExecOnce(b, func(x *Node) *Node {
			return Add(x, Const(x.Graph(), []float32{1, 2, 3}))
		}, []float32{1, 2})
	})
	if err == nil || !strings.HasPrefix(err.Error(), "gomlx: ") {
		t.Fatalf("want a gomlx error, got %v", err)
	}
	if err := Call(func() {}); err != nil {
		t.Fatalf("no panic: got %v", err)
	}
}

// The patched VJP must not silently fall back to the stock one: the node description must parse.
func TestParseDotGeneral(t *testing.T) {
	b := newBackend(t)
	var got DotGeneralAxes
	var err error
	_ = MustExecOnce(b, func(x *Node) *Node {
		y := Reshape(x, 2, 3, 4)
		out := DotGeneral(y, []int{2, 1}, []int{0}, y, []int{2, 1}, []int{0})
		got, err = ParseDotGeneral(out)
		return out
	}, make([]float32, 24))
	if err != nil {
		t.Fatal(err)
	}
	want := DotGeneralAxes{LhsContracting: []int{2, 1}, LhsBatch: []int{0}, RhsContracting: []int{2, 1}, RhsBatch: []int{0}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// largestNode returns the size (elements) of the largest node of x's graph.
func largestNode(x *Node) int {
	n := 0
	for _, node := range x.Graph().Nodes() {
		if node.NumOutputs() == 1 {
			n = max(n, node.Shape().Size())
		}
	}
	return n
}

// The point of the patch: the gradient of a linear layer x [T,in] · W[out,in]ᵀ must not build a
// [T,out,in] tensor (the stock VJP does: 64·48·32 elements here), only operand-sized ones.
func TestDotGeneralVJP_NoCrossProductTensor(t *testing.T) {
	Install()
	b := newBackend(t)
	var stock, patched int
	run := func() int {
		var got int
		_ = MustExecOnce(b, func(xf, wf *Node) *Node {
			x, w := Reshape(xf, 64, 32), Reshape(wf, 48, 32)
			y := DotGeneral(x, []int{1}, nil, w, []int{1}, nil) // [64,48]
			grads := Gradient(ReduceAllSum(Square(y)), x, w)
			got = largestNode(grads[0])
			return Add(ReduceAllSum(grads[0]), ReduceAllSum(grads[1]))
		}, make([]float32, 64*32), make([]float32, 48*32))
		return got
	}
	withVJP(NodeTypeDotGeneral, stockDotGeneralVJP, func() { stock = run() })
	withVJP(NodeTypeDotGeneral, DotGeneralVJP, func() { patched = run() })
	if stock < 64*48*32 {
		t.Fatalf("stock VJP's largest node has %d elements; the test no longer shows the problem", stock)
	}
	if patched > 64*48 {
		t.Errorf("patched VJP builds a node of %d elements, want at most %d (the output's size)", patched, 64*48)
	}
}
