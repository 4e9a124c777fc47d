package qwen2

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/ml/train"
	"github.com/gomlx/gomlx/pkg/ml/train/optimizers"
)

// newTrainStep builds one AdamW step (lr 1e-3, weight decay 0.01) on MeanNLL with the gradients
// clipped to a global L2 norm of maxNorm; the exec returns (loss, gradient norm before clipping).
func newTrainStep(t testing.TB, b backends.Backend, ctx *context.Context, cfg *Config, maxNorm float64) *context.Exec {
	t.Helper()
	opt := optimizers.Adam().LearningRate(1e-3).WeightDecay(0.01).Done()
	exec, err := context.NewExec(b, ctx, func(ctx *context.Context, ids, pos, mask, scored *Node) (*Node, *Node) {
		loss := MeanNLL(TokenLogProbs(ctx, cfg, ids, pos, mask), scored)
		_, grads := Gradients(ctx, loss)
		var sq []*Node
		for _, g := range grads {
			sq = append(sq, ReduceAllSum(Square(ConvertDType(g, dtypes.Float32))))
		}
		norm := Sqrt(ReduceAllSum(Stack(sq, 0)))
		scale := MinScalar(Div(Scalar(loss.Graph(), dtypes.Float32, maxNorm), AddScalar(norm, 1e-6)), 1)
		for i, g := range grads {
			grads[i] = Mul(g, ConvertDType(scale, g.DType()))
		}
		opt.(train.OptimizeWithGradients).UpdateGraphWithGradients(ctx, grads, loss.DType())
		return loss, norm
	})
	if err != nil {
		t.Fatal(err)
	}
	return exec
}

func batchTensors(b *Batch) []any {
	return []any{tensors.FromValue(b.IDs), tensors.FromValue(PositionIDs(b.Mask)), tensors.FromValue(b.Mask),
		tensors.FromValue(ScoredMask(b.Mask, b.CompletionStart))}
}

// AdamW steps through the model's gradients (in optimizer order) lower the loss; the first step's
// loss and gradient norm are the reference's.
func TestTrainStep_LowersLoss(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	want := readExpected(t, "left_pad", "float64")
	exec := newTrainStep(t, testBackendOrSkip(t), ctx, cfg, 1.0)
	defer exec.Finalize()
	args := batchTensors(readInput(t, "left_pad"))
	var first, last float32
	for step := range 5 {
		loss, norm, err := exec.Exec2(args...)
		if err != nil {
			t.Fatal(err)
		}
		last = tensors.ToScalar[float32](loss)
		if step == 0 {
			first = last
			if g := float64(tensors.ToScalar[float32](norm)); !near(g, want.Grad.GlobalL2, 1e-4*want.Grad.GlobalL2) ||
				!near(float64(first), want.Loss, 1e-4) {
				t.Errorf("step 1: loss %g, grad norm %g; want %g, %g", first, g, want.Loss, want.Grad.GlobalL2)
			}
		}
	}
	if !(last < first-0.05) {
		t.Errorf("loss %g after 5 AdamW steps, %g before", last, first)
	}
}
