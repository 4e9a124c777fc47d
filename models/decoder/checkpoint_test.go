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

// checkpointGrads is the gradient of Σ w ⊙ log p(ids) (w a fixed per-token weight, so that
// the adjoints differ per token) with respect to every weight of cfg's model, with the layers
// checkpointed or not, and the loss.
func checkpointGrads(t *testing.T, cfg *Config, ctx *context.Context, checkpointed bool) (float64, [][]float64) {
	t.Helper()
	const b, s = 2, 12
	ids, pos, mask, w := make([][]int32, b), make([][]int32, b), make([][]int32, b), make([][]float32, b)
	for r := range b {
		for c := range s {
			ids[r] = append(ids[r], int32((r*131+c*17+5)%cfg.VocabSize))
			pos[r] = append(pos[r], int32(c))
			mask[r] = append(mask[r], int32(min(1, (c+r+1)%7)))
			w[r] = append(w[r], float32(1+(r*s+c)%5)/7)
		}
	}
	var names []string
	for _, spec := range cfg.Tensors() {
		names = append(names, spec.Name)
	}
	exec, err := context.NewExec(backend.SharedForTests(), ctx.Reuse(), func(ctx *context.Context, in []*Node) []*Node {
		g := in[0].Graph()
		if checkpointed {
			CheckpointLayers(g)
		}
		h := Hidden(ctx, cfg, in[0], in[1], in[2])
		lp := TargetLogProbs(ctx, cfg, h, in[0])
		loss := Neg(ReduceAllSum(Mul(lp, in[3])))
		var vals []*Node
		for _, n := range names {
			scope, name := VarScope(n)
			vals = append(vals, ctx.GetVariableByScopeAndName(scope, name).ValueGraph(g))
		}
		return append([]*Node{loss}, Gradient(CheckpointGradients(loss), vals...)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	outs, err := exec.Exec(ids, pos, mask, w)
	if err != nil {
		t.Fatal(err)
	}
	var grads [][]float64
	for _, o := range outs[1:] {
		f, err := Float32s(o)
		if err != nil {
			t.Fatal(err)
		}
		g := make([]float64, len(f))
		for i, x := range f {
			g[i] = float64(x)
		}
		grads = append(grads, g)
	}
	return float64(tensors.ToScalar[float32](outs[0])), grads
}

// Checkpointed layers give the gradients the kept activations give: every weight's gradient
// (embedding, each layer's projections and norms, the final norm; the head's logits in chunks)
// of a Qwen2 and a Gemma 3 model, float32 and bfloat16, agrees with the plain backward pass to its dtype's round-off.
func TestCheckpointLayers_SameGradients(t *testing.T) {
	for _, preset := range []string{"tiny", "gemma-3-tiny"} {
		for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
			cfg, err := Preset(preset)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ChunkElements = 2 * 4 * cfg.VocabSize // LM-head chunks of 4 positions: 3 per row of 11 scored
			ctx := context.New()
			if err := InitWeights(ctx, cfg, 11, dt); err != nil {
				t.Fatal(err)
			}
			loss0, plain := checkpointGrads(t, cfg, ctx, false)
			loss1, ckpt := checkpointGrads(t, cfg, ctx, true)
			if loss0 != loss1 {
				t.Errorf("%s %s: loss %v plain, %v checkpointed", preset, dt, loss0, loss1)
			}
			worst, scale := 0.0, 0.0
			for i := range plain {
				for j := range plain[i] {
					worst = max(worst, math.Abs(plain[i][j]-ckpt[i][j]))
					scale = max(scale, math.Abs(plain[i][j]))
				}
			}
			// float32: round-off of the largest gradient (measured 2.4e-7 on the pure-Go backend and
			// 2.4e-6 on XLA, of 5.71: the head's per-chunk weight gradients are added in another
			// order). bfloat16: three bfloat16 ulps of the largest gradient (8 significant bits;
			// measured up to half an ulp on the pure-Go backend, 1.75 on XLA): the plain backward
			// adds the head's per-chunk weight gradients in bfloat16, the checkpointed one in
			// float32, and XLA fuses the plain and the recomputed layers' elementwise chains
			// differently, rounding their bfloat16 intermediates at other points.
			bound := 1e-6 * scale
			if dt == dtypes.BFloat16 {
				bound = 3 * math.Pow(2, math.Floor(math.Log2(scale))-7)
			}
			t.Logf("%s %s: largest |Δ gradient| %.3g (largest gradient %.3g, bound %.3g)", preset, dt, worst, scale, bound)
			if scale == 0 || worst > bound {
				t.Errorf("%s %s: largest |Δ gradient| %.3g > %.3g (largest gradient %.3g)", preset, dt, worst, bound, scale)
			}
		}
	}
}
