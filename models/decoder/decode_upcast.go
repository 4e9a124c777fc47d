package decoder

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// On XLA's CPU backend a bfloat16 product runs far slower than a float32 one: the CPU dot emitter
// has no bfloat16 kernel (with --xla_cpu_use_onednn=true its RET_CHECK in dot_op_emitter.cc lists
// the types it emits, and BF16 is not among them). One [1,896]·[151936,896]ᵀ product (Qwen2.5-0.5B's
// LM head in a decode step) took 0.44-0.84 s in bfloat16 and 0.049 s in float32, a [1,896]·
// [4864,896]ᵀ one 2.6 ms and 1.1 ms (the pinned plugin, a 2-core machine at load average 7-10,
// 2026-12-02; the XNNPACK, YNNPACK and oneDNN fusion flags of XLA_FLAGS did not change that), and
// BenchmarkCPU/decode_bf16 made 0.22 tokens/s against 6.1 in float32 (4.6 with the copies below).
//
// The upcast copies are float32 copies of the bfloat16 projection weights and of the LM head
// (bfloat16 → float32 is exact), non-trainable variables at decodeUpcastScope followed by the
// weight's scope and name. Arch.PrepareWeights makes them at the start of every cached generation
// on an XLA CPU backend and makes one again when its weight's tensor changed, as it does the decode
// layouts of the pure-Go backend (decode_layout.go). The graphs of Arch.Prefill and Arch.Decode
// then multiply x converted to float32 by the copy, sum in float32 and round the result to
// bfloat16 once; the logits differ from the plain bfloat16 product's by bfloat16 rounding
// (TestPrefill_XLACPUUpcastMatchesBFloat16Product). The copies cost four bytes per parameter
// beside the bfloat16 weights for as long as the context lives, and the first generation after a
// weight update converts it again on the host. Training, scoring, an active adapter and the other
// backends keep the plain bfloat16 product.
const decodeUpcastScope = "/posttrain_decode_upcast"

// prepareUpcasts makes or refreshes the upcast copy of every bfloat16 projection weight and of
// the LM head in ctx (see decodeUpcastScope) from the weights' current values; a copy whose
// weight still holds the tensor it was made from is kept.
func (a Arch) prepareUpcasts(ctx *context.Context, sources *layoutSources) error {
	for _, v := range a.productWeights(ctx, dtypes.BFloat16) {
		val, err := v.Value()
		if err != nil {
			return fmt.Errorf("float32 copy of %s/%s: %w", v.Scope(), v.Name(), err)
		}
		key := decodeUpcastScope + v.Scope() + ":" + v.Name()
		uctx := ctx.InAbsPath(decodeUpcastScope + v.Scope()).Checked(false)
		uv := uctx.GetVariableByScopeAndName(uctx.Scope(), v.Name())
		if uv != nil && sources.src[key] == val {
			continue
		}
		t := upcastOf(val)
		if uv == nil {
			uctx.VariableWithValue(v.Name(), t).SetTrainable(false)
		} else if err := uv.SetValue(t); err != nil {
			return fmt.Errorf("float32 copy of %s/%s: %w", v.Scope(), v.Name(), err)
		}
		sources.src[key] = val
	}
	return nil
}

// upcastOf is the bfloat16 tensor w widened to a float32 host tensor, the work split over the CPUs.
func upcastOf(w *tensors.Tensor) *tensors.Tensor {
	t := tensors.FromShape(shapes.Make(dtypes.Float32, w.Shape().Dimensions...))
	tensors.MustConstFlatData(w, func(src []bfloat16.BFloat16) {
		tensors.MustMutableFlatData(t, func(dst []float32) {
			workers := min(runtime.GOMAXPROCS(0), len(src))
			var wg sync.WaitGroup
			for p := range workers {
				wg.Go(func() {
					for i := p * len(src) / workers; i < (p+1)*len(src)/workers; i++ {
						dst[i] = src[i].Float32()
					}
				})
			}
			wg.Wait()
		})
	})
	return t
}

// matmulUpcast returns x·wᵀ for bfloat16 x [...,in] and the weight [out,in] at ctx's scope as
// x in float32 times its upcast copy, rounded to bfloat16, or nil where the plain product is to be
// used: the graph does not read the copies (not Prefill or Decode), an adapter is active, x is not
// bfloat16, or no copy was prepared (another backend).
func matmulUpcast(ctx *context.Context, x *Node, out int) *Node {
	g := x.Graph()
	if on, _ := ctx.GetGraphParam(g, decodeLayoutParam); on != true || activeAdapter(ctx, g) != nil || x.DType() != dtypes.BFloat16 {
		return nil
	}
	v := ctx.GetVariableByScopeAndName(decodeUpcastScope+ctx.Scope(), "weight")
	if v == nil || !v.Shape().Equal(shapes.Make(dtypes.Float32, out, x.Shape().Dim(-1))) {
		return nil
	}
	return ConvertDType(matmulT(ConvertDType(x, dtypes.Float32), v.ValueGraph(g)), dtypes.BFloat16) // [...,out]
}
