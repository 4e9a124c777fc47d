package gomlxfix

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// embeddingGrad returns ∂/∂table Σ_{i,d} table[ids[i],d]·w[i,d] (= ScatterSum of w's rows at ids),
// through Gather and graph.Gradient, with table and w in w's dtype.
func embeddingGrad(t *testing.T, b backends.Backend, table, w *tensors.Tensor, ids []int32) *tensors.Tensor {
	t.Helper()
	idsT := tensors.FromFlatDataAndDimensions(ids, len(ids), 1)
	outs, err := execN(b, func(table, idx, w *Node) []*Node {
		loss := ReduceAllSum(Mul(Gather(table, idx), w)) // [N,D] → scalar
		return Gradient(loss, table)
	}, table, idsT, w)
	if err != nil {
		t.Fatal(err)
	}
	return outs[0]
}

// A token seen 4096+ times in a batch: its embedding-gradient row is the sum of 4096+ incoming bf16
// rows. With the patch it equals the float64 host sum converted once to bf16 (GoMLX's conversion,
// bfloat16.FromFloat64, the same the pure-Go backend applies); the stock VJP, summing in bf16,
// stalls far below it.
func TestGatherVJP_BFloat16SumsInFloat32(t *testing.T) {
	Install()
	b := newBackend(t)
	const V, D, N = 8, 4, 4096 + 64
	ids := make([]int32, N)
	w := make([]bfloat16.BFloat16, N*D)
	want := make([]float64, V*D)
	for i := range ids {
		ids[i] = 3
		if i >= 4096 {
			ids[i] = int32(i % V)
		}
		for d := range D {
			// 1 + j/128 is exact in bf16 and every partial sum (< 2¹⁴, multiples of 2⁻⁷) in float32.
			x := bfloat16.FromFloat64(1 + float64((i*5+d*3)%128)/128)
			w[i*D+d] = x
			want[int(ids[i])*D+d] += float64(x.Float32())
		}
	}
	table := tensors.FromFlatDataAndDimensions(make([]bfloat16.BFloat16, V*D), V, D)
	wT := tensors.FromFlatDataAndDimensions(w, N, D)
	check := func(got *tensors.Tensor) (bad int, worst string) {
		flat := tensors.MustCopyFlatData[bfloat16.BFloat16](got)
		maxErr := 0.0
		for k, x := range flat {
			if wantK := bfloat16.FromFloat64(want[k]); x != wantK {
				bad++
				if e := math.Abs(float64(x.Float32() - wantK.Float32())); e > maxErr {
					maxErr, worst = e, fmt.Sprintf("[%d,%d]: got %s, want %s", k/D, k%D, x, wantK)
				}
			}
		}
		return bad, worst
	}
	if bad, worst := check(embeddingGrad(t, b, table, wT, ids)); bad > 0 {
		t.Errorf("patched VJP: %d of %d gradient entries differ from the float64 sum rounded once, worst %s", bad, V*D, worst)
	}
	var stock *tensors.Tensor
	withVJP(NodeTypeGather, stockGather, func() { stock = embeddingGrad(t, b, table, wT, ids) })
	if bad, worst := check(stock); bad == 0 {
		t.Fatal("the stock VJP matches too: the test no longer shows the bf16 summation error")
	} else {
		t.Logf("stock VJP: %d of %d entries off, worst %s", bad, V*D, worst)
	}
}

// float32 tables keep the stock gradient, bit for bit.
func TestGatherVJP_Float32Unchanged(t *testing.T) {
	Install()
	b := newBackend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	const V, D, N = 16, 8, 500
	ids := make([]int32, N)
	for i := range ids {
		ids[i] = int32(rng.IntN(V))
	}
	table := tensors.FromFlatDataAndDimensions(make([]float32, V*D), V, D)
	w := make([]float32, N*D)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	wT := tensors.FromFlatDataAndDimensions(w, N, D)
	patched := tensors.MustCopyFlatData[float32](embeddingGrad(t, b, table, wT, ids))
	var stockT *tensors.Tensor
	withVJP(NodeTypeGather, stockGather, func() { stockT = embeddingGrad(t, b, table, wT, ids) })
	stock := tensors.MustCopyFlatData[float32](stockT)
	for k := range stock {
		if math.Float32bits(patched[k]) != math.Float32bits(stock[k]) {
			t.Fatalf("entry %d: patched %v, stock %v", k, patched[k], stock[k])
		}
	}
}

// The patch must recognise graph.Gather's node (else it silently falls back to the stock VJP) and
// leave other Gather forms (GatherSlices: no collapsed axes) to the stock VJP.
func TestParseSimpleGather(t *testing.T) {
	b := newBackend(t)
	var gather [2]bool
	var sliced bool
	_ = MustExecOnce(b, func(x, idx *Node) *Node {
		table := Reshape(x, 6, 4)
		g := Gather(table, idx, true) // [1,3,4], as the model's embedding lookup of ids [B,S,1]
		gather[0], gather[1] = parseSimpleGather(g)
		s := GatherSlices(table, []int{0}, idx, []int{2}, false) // [1,3,2,4]
		sliced, _ = parseSimpleGather(s)
		return Add(ReduceAllSum(g), ReduceAllSum(s))
	}, make([]float32, 24), [][][]int32{{{0}, {2}, {4}}})
	if gather != [2]bool{true, true} {
		t.Errorf("Gather(sorted): parseSimpleGather = %v, want [true true]", gather)
	}
	if sliced {
		t.Error("GatherSlices parsed as a simple Gather")
	}
}
