package decoder

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
)

// TargetLogSumSquaredProbs equals log Σ_v softmax(logits)² computed on the host in float64 from the
// full logits of the tiny model, shifted one position right with 0 at t = 0, also when the
// vocabulary reduction runs in several chunks; and it carries no gradient.
func TestTargetLogSumSquaredProbs_MatchFullLogits(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	for _, elements := range []int{0, 3 * cfg.VocabSize} { // one chunk; chunks of ⌊3/B⌋ ≥ 1 positions
		cfg.ChunkElements = elements
		for _, name := range fixtureCases {
			b := readInput(t, name)
			exec, err := context.NewExec(backend.SharedForTests(), ctx, func(ctx *context.Context, ids, pos, mask *Node) []*Node {
				h := Hidden(ctx, cfg, ids, pos, mask)
				q := TargetLogSumSquaredProbs(ctx, cfg, h)
				grad := Gradient(ReduceAllSum(Add(q, ReduceSum(h, -1))), h)[0] // only the ReduceSum's 1s
				return []*Node{q, Logits(ctx, cfg, h), ReduceAllSum(Abs(AddScalar(grad, -1)))}
			})
			if err != nil {
				t.Fatal(err)
			}
			outs, err := exec.Exec(tensors.FromValue(b.IDs), tensors.FromValue(PositionIDs(b.Mask)), tensors.FromValue(b.Mask))
			exec.Finalize()
			if err != nil {
				t.Fatal(err)
			}
			q, _ := Float32s(outs[0])
			logits, _ := Float32s(outs[1])
			if g := tensors.ToScalar[float32](outs[2]); g != 0 {
				t.Errorf("%s: gradient through TargetLogSumSquaredProbs: Σ|∂ − 1| = %v, want 0", name, g)
			}
			_, s := b.Dims()
			v := cfg.VocabSize
			for i := range q {
				want := 0.0
				if i%s != 0 {
					z := logits[(i-1)*v : i*v] // the logits at t−1 score token t
					top := math.Inf(-1)
					for _, x := range z {
						top = math.Max(top, float64(x))
					}
					var sum, sq float64
					for _, x := range z {
						sum += math.Exp(float64(x) - top)
					}
					for _, x := range z {
						p := math.Exp(float64(x)-top) / sum
						sq += p * p
					}
					want = math.Log(sq)
				}
				if math.Abs(float64(q[i])-want) > 1e-5 {
					t.Errorf("%s chunk elements %d, position %d: %v, want log Σ p² = %v", name, elements, i, q[i], want)
				}
			}
		}
	}
}
