package decoder

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
)

// On XLA's CPU backend the generator's bfloat16 prompt pass and decode steps multiply by float32
// copies of the weights (decode_upcast.go): PrepareWeights makes them, the prompt pass reads them
// (a zeroed LM-head copy zeroes the logits), and its logits are those of the plain bfloat16
// products to within bfloat16 rounding.
func TestPrefill_XLACPUUpcastMatchesBFloat16Product(t *testing.T) {
	b, err := backend.New("xla:cpu")
	if err != nil {
		t.Skipf("needs the XLA CPU plugin (make xla-cpu): %v", err)
	}
	defer b.Finalize()
	_, cfg := layoutConfig(t)
	ctx := context.New()
	if err := InitWeights(ctx, cfg, 7, dtypes.BFloat16); err != nil {
		t.Fatal(err)
	}
	arch := Arch{Config: cfg}
	if err := arch.PrepareWeights(ctx, b, 2); err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"/model/layers/0/self_attn/q_proj", "/model/layers/1/mlp/down_proj", "/model/embed_tokens"} {
		if v := ctx.GetVariableByScopeAndName(decodeUpcastScope+scope, "weight"); v == nil || v.DType() != dtypes.Float32 {
			t.Fatalf("no float32 copy of %s after PrepareWeights", scope)
		}
	}
	ids := [][]int32{{5, 17, 300, 4000, 9}, {77, 1024, 3, 8, 2}}
	mask := [][]int32{{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}}
	run := func(fn func(ctx *context.Context, ids, pos, mask *Node) *Node) []float32 {
		t.Helper()
		exec, err := context.NewExec(b, ctx, fn)
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Finalize()
		out, err := exec.Exec(tensors.FromValue(ids), tensors.FromValue(PositionIDs(mask)), tensors.FromValue(mask))
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[float32](out[0])
	}
	prefill := func(ctx *context.Context, ids, pos, mask *Node) *Node {
		logits, _ := arch.Prefill(ctx, ids, pos, mask)
		return logits
	}
	got := run(prefill)
	want := run(func(ctx *context.Context, ids, pos, mask *Node) *Node { // no graph parameter: plain products
		h := Decoder(ctx, cfg, ids, pos, AttentionMask(mask), nil)
		return Logits(ctx, cfg, Reshape(Slice(h, AxisRange(), AxisElem(4)), 2, -1))
	})
	// One bfloat16 step (2⁻⁷ relative) of the largest logit: the products round differently
	// (float32 sums rounded once, against XLA's bfloat16 product); measured 0.0039 for logits up
	// to 1.35.
	var maxW float64
	for _, w := range want {
		maxW = max(maxW, math.Abs(float64(w)))
	}
	for i := range want {
		if d := math.Abs(float64(got[i] - want[i])); d > maxW/128 {
			t.Fatalf("logit %d: %g through the float32 copies, %g through the bfloat16 product (|Δ| %g > %g)", i, got[i], want[i], d, maxW/128)
		}
	}

	head := ctx.GetVariableByScopeAndName(decodeUpcastScope+"/model/embed_tokens", "weight")
	if err := head.SetValue(tensors.FromShape(head.Shape())); err != nil {
		t.Fatal(err)
	}
	for i, l := range run(prefill) {
		if l != 0 {
			t.Fatalf("logit %d = %g with a zeroed LM-head copy, want 0", i, l)
		}
	}
}
