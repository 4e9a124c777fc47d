// Package gomlxfix patches GoMLX v0.26.0 where it is unusable or incomplete for LLM training, and
// turns GoMLX panics into errors (see ../shared/notes/gomlx-v0.26.md):
//
//   - DotGeneral's stock gradient multiplies broadcast operands and reduces, materializing a
//     [batch, lhsCross, rhsCross, contracting] tensor (35 GB for one MLP projection at 2048 tokens).
//     It is replaced by two DotGenerals and a transpose.
//   - Rsqrt has no gradient; d/dx x^-1/2 = -1/2 y^3 is registered.
//   - Slice's gradient uses Pad, which the pure-Go backend lacks; for unit strides it is replaced by
//     a Concatenate with zeros, which every backend has.
//   - Gather's gradient (the embedding gradient) scatter-adds the incoming rows in the table's dtype,
//     so a bf16 table sums the rows of a repeated token in bf16 (8 significant bits). For 16-bit
//     tables the scatter runs in float32 and the sum is rounded once.
//
// Install registers the replacements; every package that builds gradients calls it from init.
package gomlxfix

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

var (
	installOnce                                 sync.Once
	stockDotGeneralVJP, stockSlice, stockGather VJP
)

// Install registers the replacement gradients in graph.VJPRegistration. It is idempotent and safe
// to call from several init functions.
func Install() {
	installOnce.Do(func() {
		stockDotGeneralVJP = VJPRegistration[NodeTypeDotGeneral]
		stockSlice = VJPRegistration[NodeTypeSlice]
		stockGather = VJPRegistration[NodeTypeGather]
		VJPRegistration[NodeTypeDotGeneral] = DotGeneralVJP
		VJPRegistration[NodeTypeRsqrt] = RsqrtVJP
		VJPRegistration[NodeTypeSlice] = SliceVJP
		VJPRegistration[NodeTypeGather] = GatherVJP
	})
}

// Call runs fn and returns any panic raised inside it (GoMLX graph building and execution report
// errors by panicking) as an error. Use it at the Exec boundary so users see one line, not a trace.
// Panics inside the pure-Go backend's worker goroutines cannot be caught here.
func Call(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = PanicError(r)
		}
	}()
	fn()
	return nil
}

// PanicError converts a recovered panic value into an error.
func PanicError(r any) error {
	if e, ok := r.(error); ok {
		return fmt.Errorf("gomlx: %w", e)
	}
	return fmt.Errorf("gomlx: %v", r)
}

// ErrNotParsed is returned by the node parsers when a node's description has an unexpected format.
var ErrNotParsed = errors.New("gomlxfix: node description not understood")

// GoMLX does not export a DotGeneral node's axes; its String() prints them (gen_backend_ops.go).
var dotGeneralRE = regexp.MustCompile(`DotGeneral\(lhs=\[#(\d+)\], lhsContractingAxes=\[([\d ]*)\], lhsBatchAxes=\[([\d ]*)\], rhs=\[#(\d+)\], rhsContractingAxes=\[([\d ]*)\], rhsBatchAxes=\[([\d ]*)\]\)`)

// DotGeneralAxes are the axes of a DotGeneral node.
type DotGeneralAxes struct {
	LhsContracting, LhsBatch, RhsContracting, RhsBatch []int
}

// ParseDotGeneral reads the axes of a DotGeneral node from its description, checking that the
// operand ids match the node's inputs.
func ParseDotGeneral(node *Node) (DotGeneralAxes, error) {
	m := dotGeneralRE.FindStringSubmatch(node.String())
	in := node.Inputs()
	if m == nil || len(in) != 2 || m[1] != strconv.Itoa(int(in[0].Id())) || m[4] != strconv.Itoa(int(in[1].Id())) {
		return DotGeneralAxes{}, ErrNotParsed
	}
	var ax DotGeneralAxes
	var err error
	for i, dst := range []*[]int{&ax.LhsContracting, &ax.LhsBatch, nil, &ax.RhsContracting, &ax.RhsBatch} {
		if dst == nil {
			continue
		}
		if *dst, err = parseInts(m[2+i]); err != nil {
			return DotGeneralAxes{}, err
		}
	}
	return ax, nil
}

func parseInts(s string) ([]int, error) {
	fields := strings.Fields(s)
	out := make([]int, len(fields))
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, ErrNotParsed
		}
		out[i] = n
	}
	return out, nil
}

// crossAxes lists the axes of a rank-r operand that are neither contracted nor batch, in order.
func crossAxes(rank int, contracting, batch []int) []int {
	var out []int
	for a := range rank {
		if !slices.Contains(contracting, a) && !slices.Contains(batch, a) {
			out = append(out, a)
		}
	}
	return out
}

// DotGeneralVJP is the gradient of out = DotGeneral(lhs, rhs) (out axes: [batch, lhsCross,
// rhsCross]) as two DotGenerals: dLhs = v·rhs contracting rhsCross, dRhs = v·lhs contracting
// lhsCross, each followed by a transpose back to its operand's axis order. Nodes it cannot parse
// get the stock VJP.
func DotGeneralVJP(node *Node, vjpOutputs []*Node, outputShape shapes.Shape) []*Node {
	ax, err := ParseDotGeneral(node)
	if err != nil {
		return stockDotGeneralVJP(node, vjpOutputs, outputShape)
	}
	v := vjpOutputs[0]
	lhs, rhs := node.Inputs()[0], node.Inputs()[1]
	lx := crossAxes(lhs.Rank(), ax.LhsContracting, ax.LhsBatch)
	rx := crossAxes(rhs.Rank(), ax.RhsContracting, ax.RhsBatch)
	nb := len(ax.LhsBatch)
	vBatch := iotaFrom(0, nb)
	vLhsCross := iotaFrom(nb, len(lx))
	vRhsCross := iotaFrom(nb+len(lx), len(rx))

	gradLhs := DotGeneral(v, vRhsCross, vBatch, rhs, rx, ax.RhsBatch) // [batch, lhsCross, rhs contracting in rhs order]
	gradLhs = backToOperand(gradLhs, lhs.Rank(), ax.LhsBatch, lx, ax.LhsContracting, ax.RhsContracting)
	gradRhs := DotGeneral(v, vLhsCross, vBatch, lhs, lx, ax.LhsBatch) // [batch, rhsCross, lhs contracting in lhs order]
	gradRhs = backToOperand(gradRhs, rhs.Rank(), ax.RhsBatch, rx, ax.RhsContracting, ax.LhsContracting)
	return []*Node{gradLhs, gradRhs}
}

// backToOperand transposes a gradient laid out as [batch, cross, paired contracting axes in the
// other operand's axis order] into the operand's own axis order.
func backToOperand(grad *Node, rank int, batch, cross, contracting, otherContracting []int) *Node {
	perm := make([]int, rank)
	for i, a := range batch {
		perm[a] = i
	}
	for j, a := range cross {
		perm[a] = len(batch) + j
	}
	sortedOther := slices.Sorted(slices.Values(otherContracting))
	for k, a := range contracting {
		perm[a] = len(batch) + len(cross) + slices.Index(sortedOther, otherContracting[k])
	}
	for i, p := range perm {
		if i != p {
			return TransposeAllAxes(grad, perm...)
		}
	}
	return grad
}

func iotaFrom(start, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// RsqrtVJP is the gradient of y = x^(-1/2): dy/dx = -y³/2.
func RsqrtVJP(node *Node, vjpOutputs []*Node, _ shapes.Shape) []*Node {
	y := node
	return []*Node{Mul(vjpOutputs[0], MulScalar(Mul(y, Square(y)), -0.5))}
}

var sliceRE = regexp.MustCompile(`Slice\(x=\[#(\d+)\], starts=\[([\d ]*)\], limits=\[([\d ]*)\], strides=\[([\d ]*)\]\)`)

// SliceVJP is the gradient of a unit-stride Slice: the incoming gradient surrounded by zeros,
// built with Concatenate (the stock VJP uses Pad, missing from the pure-Go backend). Strided or
// unparsable slices get the stock VJP.
func SliceVJP(node *Node, vjpOutputs []*Node, outputShape shapes.Shape) []*Node {
	x := node.Inputs()[0]
	m := sliceRE.FindStringSubmatch(node.String())
	if m == nil || m[1] != strconv.Itoa(int(x.Id())) {
		return stockSlice(node, vjpOutputs, outputShape)
	}
	starts, err1 := parseInts(m[2])
	limits, err2 := parseInts(m[3])
	strides, err3 := parseInts(m[4])
	if err1 != nil || err2 != nil || err3 != nil || len(starts) != x.Rank() || len(limits) != x.Rank() {
		return stockSlice(node, vjpOutputs, outputShape)
	}
	for _, s := range strides {
		if s > 1 {
			return stockSlice(node, vjpOutputs, outputShape)
		}
	}
	g := node.Graph()
	grad := vjpOutputs[0]
	for axis, dim := range x.Shape().Dimensions {
		parts := make([]*Node, 0, 3)
		if starts[axis] > 0 {
			parts = append(parts, Zeros(g, withDim(grad.Shape(), axis, starts[axis])))
		}
		parts = append(parts, grad)
		if limits[axis] < dim {
			parts = append(parts, Zeros(g, withDim(grad.Shape(), axis, dim-limits[axis])))
		}
		if len(parts) > 1 {
			grad = Concatenate(parts, axis)
		}
	}
	return []*Node{grad}
}

func withDim(s shapes.Shape, axis, dim int) shapes.Shape {
	dims := slices.Clone(s.Dimensions)
	dims[axis] = dim
	return shapes.Make(s.DType, dims...)
}

var gatherRE = regexp.MustCompile(`Gather\(operand=\[#(\d+)\], startIndices=\[#(\d+)\], indexVectorAxis=(\d+), offsetOutputAxes=\[[\d ]*\], collapsedSliceAxes=\[([\d ]*)\], startIndexMap=\[([\d ]*)\], sliceSizes=\[([\d ]*)\], indicesAreSorted=(true|false)\)`)

// parseSimpleGather reports whether node is a Gather as graph.Gather builds it (the form the
// stock VJP turns into ScatterSum): the index vector is the last axis of the indices, indexes
// the first k operand axes in order, which are collapsed with slice size 1, and the remaining axes
// are sliced whole. It also returns the node's indicesAreSorted flag.
func parseSimpleGather(node *Node) (simple, sorted bool) {
	m := gatherRE.FindStringSubmatch(node.String())
	in := node.Inputs()
	if m == nil || len(in) != 2 || m[1] != strconv.Itoa(int(in[0].Id())) || m[2] != strconv.Itoa(int(in[1].Id())) {
		return false, false
	}
	operand, indices := in[0].Shape(), in[1].Shape()
	collapsed, err1 := parseInts(m[4])
	startMap, err2 := parseInts(m[5])
	sizes, err3 := parseInts(m[6])
	k := len(collapsed)
	if err1 != nil || err2 != nil || err3 != nil || indices.Rank() == 0 ||
		m[3] != strconv.Itoa(indices.Rank()-1) || indices.Dimensions[indices.Rank()-1] != k ||
		!slices.Equal(startMap, iotaFrom(0, k)) || len(sizes) != operand.Rank() {
		return false, false
	}
	for axis, dim := range operand.Dimensions {
		if axis < k && (collapsed[axis] != axis || sizes[axis] != 1) || axis >= k && sizes[axis] != dim {
			return false, false
		}
	}
	return true, m[7] == "true"
}

// GatherVJP is the gradient of a simple Gather from a 16-bit (bfloat16, float16) operand: the
// incoming rows scatter-added into float32 zeros, converted once to the operand dtype. The stock
// VJP scatter-adds in the operand dtype, so 4096 bf16 updates of 1 to one row stall at 256.
// Other dtypes and Gather forms get the stock VJP.
func GatherVJP(node *Node, vjpOutputs []*Node, outputShape shapes.Shape) []*Node {
	operand := node.Inputs()[0]
	dtype := operand.DType()
	if dtype != dtypes.BFloat16 && dtype != dtypes.Float16 {
		return stockGather(node, vjpOutputs, outputShape)
	}
	simple, sorted := parseSimpleGather(node)
	if !simple {
		return stockGather(node, vjpOutputs, outputShape)
	}
	zeros := Zeros(node.Graph(), shapes.Make(dtypes.Float32, operand.Shape().Dimensions...))
	sum := ScatterSum(zeros, node.Inputs()[1], ConvertDType(vjpOutputs[0], dtypes.Float32), sorted, false)
	return []*Node{ConvertDType(sum, dtype), nil} // no gradient for the indices
}
