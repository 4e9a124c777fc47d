package decoder

import (
	"github.com/gomlx/gomlx/backends/simplego"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import

	"github.com/posttrain/posttrain/internal/backend"
)

// matmulT is x·wᵀ: x [...,in], w [out,in] (HF's nn.Linear layout) → [...,out], one DotGeneral
// contracting the last axes, except where the pure-Go backend would run that product badly.
//
// GoMLX v0.26's pure-Go backend (simplego) runs a DotGeneral of rows × out outputs per batch
// example in one of two kernels. Up to 16 blocks (rows·out ≤ 16·32² in float32 and bfloat16,
// simplego.DotGeneralTargetBlockLog2Dim) a direct one reads both operands in place, with one
// goroutine per batch example. Above that a blocked one copies both operands into 32×32 blocks
// at every call, padding the rows to 32. For a few rows against a large out, such as the LM head
// of one decode step (1 × 151,936 at Qwen2.5's vocabulary), the blocked kernel computes 32 rows
// to use one and re-blocks the whole [V,D] matrix per token: one 1 × 151,936 × 896 product took
// 23.9 s in the blocked kernel and 1.6 s in the direct one (a 2-core machine, heavily loaded,
// 2026-12-01). So on that backend, when the blocked kernel would pad the rows (fewer than 32)
// and a split of out fits the direct kernel, w is viewed as k slices [k, out/k, in] (a reshape
// of the same row-major data, which simplego copies once per call since the weights are not
// donated) and x broadcast over them: one direct product per slice, each on its own goroutine.
// Each output is the same sum over in, in the same order, so the result does not depend on k.
// Other backends (XLA) always get the plain DotGeneral.
func matmulT(x, w *Node) *Node {
	out, in := w.Shape().Dim(0), w.Shape().Dim(1)
	rows := x.Shape().Size() / in
	k := directSplit(x, rows, out)
	if k <= 1 {
		return DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{1}, nil) // [...,out]
	}
	xs := BroadcastToDims(Reshape(x, 1, rows, in), k, rows, in)                           // [k,rows,in]
	y := DotGeneral(xs, []int{2}, []int{0}, Reshape(w, k, out/k, in), []int{2}, []int{0}) // [k,rows,out/k]
	y = TransposeAllDims(y, 1, 0, 2)                                                      // [rows,k,out/k]
	dims := append(x.Shape().Clone().Dimensions[:x.Rank()-1], out)
	return Reshape(y, dims...) // [...,out]
}

// directSplit is the number of slices matmulT splits out into on the pure-Go backend (see
// matmulT), 1 for no split.
func directSplit(x *Node, rows, out int) int {
	if !backend.IsPureGo(x.Graph().Backend()) {
		return 1
	}
	blockDim := 1 << simplego.DotGeneralTargetBlockLog2Dim[x.DType()]
	limit := 16 * blockDim * blockDim          // the largest product simplego runs in its direct kernel
	if rows*out <= limit || rows >= blockDim { // direct already, or rows fill the blocks
		return 1
	}
	for k := 2; k <= 256 && k <= out; k++ {
		if out%k == 0 && rows*(out/k) <= limit {
			return k
		}
	}
	return 1
}
