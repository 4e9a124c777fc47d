package decoder

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// trainBatch holds newTrainStep's graph inputs by name.
type trainBatch[T any] struct{ IDs, Pos, Mask, Scored T }

// newTrainStep builds one AdamW step (trainers/engine/step's, PyTorch's AdamW: lr 1e-3, weight decay
// 0.01) on MeanNLL with the gradients clipped to a global L2 norm of maxNorm; a Run returns the
// loss and the gradient norm before clipping.
func newTrainStep(t testing.TB, b backends.Backend, ctx *context.Context, cfg *Config, maxNorm float64) *step.Step {
	t.Helper()
	s, err := step.New(b, ctx, step.Config{Optimizer: step.AdamW, LearningRate: 1e-3, WeightDecay: 0.01, MaxGradNorm: maxNorm},
		func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
			x := named.Bind[trainBatch[*Node]](in)
			return MeanNLL(TokenLogProbs(ctx, cfg, x.IDs, x.Pos, x.Mask), x.Scored), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func batchTensors(b *Batch) []any {
	return []any{tensors.FromValue(b.IDs), tensors.FromValue(PositionIDs(b.Mask)), tensors.FromValue(b.Mask),
		tensors.FromValue(ScoredMask(b.Mask, b.CompletionStart))}
}

// batchFeed is batchTensors by name (trainBatch's fields).
func batchFeed(b *Batch) named.Feed {
	t := batchTensors(b)
	return named.Of[any](trainBatch[any]{IDs: t[0], Pos: t[1], Mask: t[2], Scored: t[3]})
}

// AdamW steps through the model's gradients (in optimizer order) lower the loss; the first step's
// loss and gradient norm are the reference's.
func TestTrainStep_LowersLoss(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	want := readExpected(t, "left_pad", "float64")
	s := newTrainStep(t, backend.SharedForTests(), ctx, cfg, 1.0)
	in := batchFeed(readInput(t, "left_pad"))
	var first, last float64
	for i := range 5 {
		r, err := s.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		last = r.Loss
		if i == 0 {
			first = last
			if g := r.GradNorm; !near(g, want.Grad.GlobalL2, 1e-4*want.Grad.GlobalL2) ||
				!near(first, want.Loss, 1e-4) {
				t.Errorf("step 1: loss %g, grad norm %g; want %g, %g", first, g, want.Loss, want.Grad.GlobalL2)
			}
		}
	}
	if !(last < first-0.05) {
		t.Errorf("loss %g after 5 AdamW steps, %g before", last, first)
	}
}
