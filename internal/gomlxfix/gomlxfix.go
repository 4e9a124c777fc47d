// Package gomlxfix patches GoMLX v0.26.0 where it is unusable or incomplete for LLM training, and
// turns GoMLX panics into errors (see ../shared/notes/gomlx-v0.26.md):
//
//   - DotGeneral's stock gradient multiplies broadcast operands and reduces, materializing a
//     [batch, lhsCross, rhsCross, contracting] tensor (35 GB for one MLP projection at 2048 tokens).
//     It is replaced by two DotGenerals and a transpose.
//   - Rsqrt has no gradient; d/dx x^-1/2 = -1/2 y^3 is registered.
//   - Slice's gradient uses Pad, which the pure-Go backend lacks; for unit strides it is replaced by
//     a Concatenate with zeros, which every backend has.
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

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

var (
	installOnce                    sync.Once
	stockDotGeneralVJP, stockSlice VJP
)

// Install registers the replacement gradients in graph.VJPRegistration. It is idempotent and safe
// to call from several init functions.
func Install() {
	installOnce.Do(func() {
		stockDotGeneralVJP = VJPRegistration[NodeTypeDotGeneral]
		stockSlice = VJPRegistration[NodeTypeSlice]
		VJPRegistration[NodeTypeDotGeneral] = DotGeneralVJP
		VJPRegistration[NodeTypeRsqrt] = RsqrtVJP
		VJPRegistration[NodeTypeSlice] = SliceVJP
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
