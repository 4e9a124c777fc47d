package decoder

import (
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
)

// The generator's prompt pass and decode steps multiply a few rows (the batch, or the batch times a
// short prompt) by every projection and the LM head. On GoMLX v0.26's pure-Go backend (simplego)
// such a product runs in its direct kernel, which walks the weight [out,in] in 64×64 tiles (64
// rows of 64 values, 4·in bytes apart: a strided read) on one goroutine per batch example, so on
// one core. The decode layout is a copy of each projection
// weight that the direct kernel reads sequentially and in parallel: [in/c, k, out/k, c] with c = 64
// (or 32) values of the contracting axis innermost and (in/c)·k batch examples, element
// [j, a, o, i] = w[a·out/k + o, j·c + i]. The product is then x's chunks [in/c, k, rows, c] times the
// layout, batched over (j, a), summed over j: every batch example reads one contiguous block of the
// weight, each on its own goroutine. Measured on a 2-core machine (loaded, 2026-12-01), one
// decode step's [1,896]·[4864,896]ᵀ took 15.8 ms as one DotGeneral and 6.4 ms as 14 chunks of 64;
// [1,896]·[896,896]ᵀ 4.8 and 1.5 ms; the whole batch-1 decode of Qwen2.5-0.5B's shape went from
// 0.22 to 0.86 tokens/s (load average 8-11, BenchmarkCPU/decode, both runs back to back).
//
// The layouts are non-trainable variables at decodeLayoutScope followed by the weight's scope and
// name (e.g. /posttrain_decode_layout/model/layers/0/mlp/gate_proj:weight), written by
// Arch.PrepareWeights, which the Generator calls at the start of every cached generation: a layout
// is made again when its weight's tensor changed (a trainer's update or a load sets a new tensor),
// so only the first generation after a change pays for the copy. They cost one more copy of the
// projection weights (and of the tied embedding, as the LM head) for as long as the context lives.
// Only the graphs of Arch.Prefill and Arch.Decode read them, only on the pure-Go backend, in float32
// and without an adapter: training, scoring, the XLA backend and bfloat16 weights (whose product
// would round each chunk's partial sum to bfloat16) keep the plain DotGeneral of matmulT. Each
// output is the same sum over in as the plain product, grouped by chunks of c: the results differ
// by float rounding only.
const (
	decodeLayoutScope = "/posttrain_decode_layout"
	// decodeLayoutParam is the graph parameter (true) of the graphs that read the layouts.
	decodeLayoutParam = "posttrain_decode_layout"
	// layoutSourcesParam is the context parameter holding the weight tensors the layouts were made
	// from (*layoutSources).
	layoutSourcesParam = "posttrain_decode_layout_sources"
	// layoutMaxCols is the most outputs per batch example of a layout (out/k): with the direct
	// kernel's limit of 16·32² products per example, up to 8 rows (a decode step of 8 sequences)
	// stay in the direct kernel.
	layoutMaxCols = 2048
)

// layoutSources maps a layout's variable (scope:name) to the weight tensor it was made from.
type layoutSources struct{ src map[string]*tensors.Tensor }

// decodeLayoutDims returns the layout [in/c, k, out/k, c] of a weight [out,in], or ok = false when
// the weight gains nothing from it (in not a multiple of 32, or one batch example: the plain layout).
func decodeLayoutDims(out, in int) (dims [4]int, ok bool) {
	c := 64
	if in%c != 0 {
		c = 32
	}
	if in%c != 0 {
		return dims, false
	}
	k := 0
	for d := 1; d <= out; d++ {
		if out%d == 0 && out/d <= layoutMaxCols {
			k = d
			break
		}
	}
	if in/c == 1 && k == 1 {
		return dims, false
	}
	return [4]int{in / c, k, out / k, c}, true
}

// PrepareWeights makes or refreshes, on the pure-Go backend, the decode layout of every float32
// projection weight and of the LM head in ctx (see decodeLayoutScope) that decode steps of rows
// sequences would read (layoutFits), from the weights' current values; a layout whose weight still
// holds the tensor it was made from is kept. It does nothing on other backends or when an adapter
// is set on ctx, and makes no layout that a batch of rows would not read (a larger batch's graphs
// never read one, so a layout left from an earlier, smaller batch is not read either).
// generate.Generator calls it before each cached generation (generate.WeightPreparer).
//
// On an XLA CPU backend it makes or refreshes the float32 copies of the bfloat16 weights instead
// (decode_upcast.go).
func (a Arch) PrepareWeights(ctx *context.Context, b backends.Backend, rows int) error {
	pureGo, xlaCPU := backend.IsPureGo(b), backend.IsXLACPU(b)
	if !(pureGo || xlaCPU) || AdapterOf(ctx) != nil {
		return nil
	}
	root := ctx.InAbsPath("/")
	srcs, _ := root.GetParam(layoutSourcesParam)
	sources, _ := srcs.(*layoutSources)
	if sources == nil {
		sources = &layoutSources{src: map[string]*tensors.Tensor{}}
		root.SetParam(layoutSourcesParam, sources)
	}
	if xlaCPU {
		return a.prepareUpcasts(ctx, sources)
	}
	for _, v := range a.productWeights(ctx, dtypes.Float32) {
		dims, ok := decodeLayoutDims(v.Shape().Dim(0), v.Shape().Dim(1))
		if !ok || !layoutFits(rows, dims) {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return fmt.Errorf("decode layout of %s/%s: %w", v.Scope(), v.Name(), err)
		}
		key := v.Scope() + ":" + v.Name()
		lctx := ctx.InAbsPath(decodeLayoutScope + v.Scope()).Checked(false)
		lv := lctx.GetVariableByScopeAndName(lctx.Scope(), v.Name())
		if lv != nil && sources.src[key] == val {
			continue
		}
		t, err := decodeLayoutOn(b, val, dims)
		if err != nil {
			return fmt.Errorf("decode layout of %s/%s: %w", v.Scope(), v.Name(), err)
		}
		if lv == nil {
			lctx.VariableWithValue(v.Name(), t).SetTrainable(false)
		} else if err := lv.SetValue(t); err != nil {
			return fmt.Errorf("decode layout of %s/%s: %w", v.Scope(), v.Name(), err)
		}
		sources.src[key] = val
	}
	return nil
}

// decodeLayoutOf copies the float32 weight w [out,in] into a host tensor of its layout dims
// [in/c, k, out/k, c] (a [in/c, out, c] transposition: row o's chunk j moves to [j, o]).
func decodeLayoutOf(w *tensors.Tensor, dims [4]int) *tensors.Tensor {
	t := tensors.FromShape(shapes.Make(dtypes.Float32, dims[:]...))
	tensors.MustMutableFlatData(t, func(dst []float32) { fillDecodeLayout(dst, w, dims) })
	return t
}

// decodeLayoutOn makes w's layout (decodeLayoutOf) directly in a buffer of backend b where b
// shares its buffers with the host (the pure-Go backend does): the copy is written once, where the
// graphs read it, instead of into a host tensor that the first execution copies again (at
// Qwen2.5-0.5B's size: 2 GB more at the peak and 2 s of copying at the first generation).
func decodeLayoutOn(b backends.Backend, w *tensors.Tensor, dims [4]int) (*tensors.Tensor, error) {
	if !b.HasSharedBuffers() {
		return decodeLayoutOf(w, dims), nil
	}
	buf, flat, err := b.NewSharedBuffer(0, shapes.Make(dtypes.Float32, dims[:]...))
	if err != nil {
		return nil, err
	}
	dst, ok := flat.([]float32)
	if !ok {
		_ = b.BufferFinalize(buf)
		return nil, fmt.Errorf("the backend's float32 buffer holds %T", flat)
	}
	fillDecodeLayout(dst, w, dims)
	// FromBuffer's tensor does not know the buffer is shared (GoMLX v0.26 builds shared tensors
	// only internally): reading it takes a view of the buffer (ConstFlatData, BufferData) and
	// finalizing it returns the buffer to the backend, which is all a layout needs; no graph
	// updates or donates it.
	return tensors.FromBuffer(b, buf)
}

// fillDecodeLayout writes the layout dims of the float32 weight w [out,in] into dst, the rows of
// w split over the CPUs.
func fillDecodeLayout(dst []float32, w *tensors.Tensor, dims [4]int) {
	out, in := w.Shape().Dim(0), w.Shape().Dim(1)
	nc, c := dims[0], dims[3]
	tensors.MustConstFlatData(w, func(src []float32) {
		workers := min(runtime.GOMAXPROCS(0), out)
		var wg sync.WaitGroup
		for p := range workers {
			wg.Go(func() {
				for o := p * out / workers; o < (p+1)*out/workers; o++ {
					for j := range nc {
						copy(dst[(j*out+o)*c:(j*out+o+1)*c], src[o*in+j*c:o*in+(j+1)*c])
					}
				}
			})
		}
		wg.Wait()
	})
}

// readsDecodeLayout marks graph g as one that multiplies by the decode layouts where they exist
// (Arch.Prefill, Arch.Decode).
func readsDecodeLayout(ctx *context.Context, g *Graph) {
	ctx.InAbsPath("/").SetGraphParam(g, decodeLayoutParam, true)
}

// decodeLayoutWeight returns the decode layout of the weight [out,in] at ctx's scope for x
// [...,in], or nil where the plain product is to be used: the graph does not read layouts, an
// adapter is active, no layout was prepared, or x has too many rows for the direct kernel.
func decodeLayoutWeight(ctx *context.Context, x *Node, out int) *Node {
	g := x.Graph()
	if on, _ := ctx.GetGraphParam(g, decodeLayoutParam); on != true || activeAdapter(ctx, g) != nil || x.DType() != dtypes.Float32 {
		return nil
	}
	in := x.Shape().Dim(-1)
	dims, ok := decodeLayoutDims(out, in)
	if !ok {
		return nil
	}
	v := ctx.GetVariableByScopeAndName(decodeLayoutScope+ctx.Scope(), "weight")
	if v == nil || !v.Shape().Equal(shapes.Make(x.DType(), dims[:]...)) {
		return nil
	}
	if !layoutFits(x.Shape().Size()/in, dims) {
		return nil
	}
	return v.ValueGraph(g)
}

// layoutFits reports whether a product of rows rows by the layout dims runs in the pure-Go
// backend's direct kernel; with more rows the blocked kernel would pad them and re-block the
// layout at every call, so the plain product is used instead.
func layoutFits(rows int, dims [4]int) bool {
	blockDim := 1 << simplego.DotGeneralTargetBlockLog2Dim[dtypes.Float32]
	return rows < blockDim && rows*dims[2] <= 16*blockDim*blockDim
}

// matmulLayout is x·wᵀ for x [...,in] and the decode layout wl [in/c, k, out/k, c] of w [out,in]
// (see decodeLayoutScope): [...,out].
func matmulLayout(x, wl *Node) *Node {
	nc, k, m, c := wl.Shape().Dim(0), wl.Shape().Dim(1), wl.Shape().Dim(2), wl.Shape().Dim(3)
	rows := x.Shape().Size() / (nc * c)
	xc := TransposeAllDims(Reshape(x, rows, nc, c), 1, 0, 2)                            // [nc,rows,c]
	xb := BroadcastToDims(Reshape(xc, nc, 1, rows, c), nc, k, rows, c)                  // [nc,k,rows,c]
	y := ReduceSum(DotGeneral(xb, []int{3}, []int{0, 1}, wl, []int{3}, []int{0, 1}), 0) // [k,rows,m]
	if k > 1 {
		y = TransposeAllDims(y, 1, 0, 2) // [rows,k,m]
	}
	dims := append(x.Shape().Clone().Dimensions[:x.Rank()-1], k*m)
	return Reshape(y, dims...) // [...,out]
}

// productWeights are ctx's 2-D weights of dtype that the decode steps multiply by: the
// projections under /model/, the LM head, and the embedding when it is tied to the LM head (an
// untied one is only gathered from). The decode layouts and XLA's float32 copies are made of them.
func (a Arch) productWeights(ctx *context.Context, dtype dtypes.DType) []*context.Variable {
	var weights []*context.Variable
	for v := range ctx.IterVariables() {
		scope := v.Scope()
		if v.Name() != "weight" || v.Shape().Rank() != 2 || v.DType() != dtype ||
			!(strings.HasPrefix(scope, "/model/") || scope == "/lm_head") {
			continue
		}
		if scope == "/model/embed_tokens" && !a.Config.TieWordEmbeddings {
			continue
		}
		weights = append(weights, v)
	}
	return weights
}
