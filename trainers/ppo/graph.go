package ppo

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// The model side of a PPO step. A rollout row is laid out as TRL lays out query_responses: the
// query left-padded to P, the response (R = response_length columns, pad after its end), and the
// forward pass of TRL's forward()/get_reward(): attention = ids ≠ pad_token_id, the pads' ids
// replaced by 0, position ids the exclusive cumsum of the attention. The logits (and values) at
// P−1+t belong to response token t (TRL's [:, context_length − 1 : −1]).
//
//	ids, pos, attn  [B,P+R] int32

// MicroBatch are the inputs of a PPO micro-batch's loss graph ([B,R] float32 beside Sequences).
type MicroBatch[T any] struct {
	rollout.Sequences[T]
	OldLogProbs, Advantages, Values, Returns T
	PGMask, VFMask, Cols                     T
}

// spec is what the compiled graphs need to know about the run.
type spec struct {
	Policy, Value *decoder.Config
	ResponseLen   int
	Temperature   float64 // the divisor of the logits: temperature + 1e-7, as TRL
	Params        LossParams
}

// responseLogProbs returns log softmax(logits/T)[token] at the R response positions [B,R] and the
// entropy of that distribution (detached) [B,R] (rollout.CompletionLogProbs at temperature + 1e-7).
func (sp *spec) responseLogProbs(ctx *context.Context, in rollout.Sequences[*Node]) (logps, entropy *Node) {
	return rollout.CompletionLogProbs(ctx, sp.Policy, in, sp.ResponseLen, sp.Temperature)
}

// responseValues is the value model's head at the R response positions [B,R] float32: TRL's
// full_value[:, context_length − 1 : −1] (its forward pass on ctx's ValueScope).
func (sp *spec) responseValues(ctx *context.Context, in rollout.Sequences[*Node]) *Node {
	s := in.IDs.Shape().Dim(1)
	p := s - sp.ResponseLen
	vctx := ctx.InAbsPath(trainable.ValueScope)
	hidden := decoder.Hidden(vctx, sp.Value, in.IDs, in.Pos, in.Attn)
	h := Slice(hidden, AxisRange(), AxisRange(p-1, s-1)) // [B,R,D]
	v := decoder.TokenScores(vctx, sp.Value, h)          // [B,R,1]
	return Reshape(v, v.Shape().Dim(0), sp.ResponseLen)
}

// lossGraph is the loop.LossFunc of a micro-batch: TRL's inner loop (forward of policy and value
// model, masking, Loss) divided by norm, the micro-batches of the optimizer step (accelerate
// divides each micro-batch's loss by the accumulation steps).
func (sp *spec) lossGraph(ctx *context.Context, nodes named.Inputs, norm *Node) (*Node, map[string]*Node) {
	in := named.Bind[MicroBatch[*Node]](nodes)
	logps, entropy := sp.responseLogProbs(ctx, in.Sequences)
	invalid := ScalarOne(logps.Graph(), logps.DType())
	logps = Where(GreaterThan(in.PGMask, ZerosLike(in.PGMask)), logps, BroadcastToShape(invalid, logps.Shape()))
	vpred := sp.responseValues(ctx, in.Sequences)
	vpred = Mul(vpred, in.VFMask) // masked_fill(padding_mask_p1, 0)
	loss, st := Loss(LossInputs{LogProbs: logps, OldLogProbs: in.OldLogProbs, Advantages: in.Advantages, VPred: vpred,
		Values: in.Values, Returns: in.Returns, PGMask: in.PGMask, VFMask: in.VFMask, Cols: in.Cols, Entropy: entropy}, sp.Params)
	loss = Div(loss, ConvertDType(StopGradient(norm), loss.DType()))
	f64 := func(x *Node) *Node { return ConvertDType(x, dtypes.Float64) }
	return loss, map[string]*Node{
		"loss/policy": f64(st.PGLoss), "loss/value": f64(st.VFLoss), "policy/clipfrac": f64(st.PGClipfrac),
		"val/clipfrac": f64(st.VFClipfrac), "policy/approxkl": f64(st.ApproxKL), "policy/entropy": f64(st.Entropy),
		"val/ratio": f64(st.Ratio),
	}
}

// logProbGraph is the forward-only graph of the policy's (or the reference's) response log-probs:
// Sequences → "logps" [B,R].
func (sp *spec) logProbGraph(ctx *context.Context, nodes named.Inputs) map[string]*Node {
	lp, _ := sp.responseLogProbs(ctx, named.Bind[rollout.Sequences[*Node]](nodes))
	return map[string]*Node{"logps": lp}
}

// valueGraph is the forward-only graph of the value model's response values: Sequences →
// "values" [B,R].
func (sp *spec) valueGraph(ctx *context.Context, nodes named.Inputs) map[string]*Node {
	return map[string]*Node{"values": sp.responseValues(ctx, named.Bind[rollout.Sequences[*Node]](nodes))}
}

// MicroBatchLoss is the loss graph the trainer compiles for one PPO micro-batch (policy and value
// model forward passes, Loss), for a caller that drives loop.Optimizer itself (posttrain bench
// memory): inputs MicroBatch with R = responseLen response columns; temperature is the sampling
// temperature (the logits' divisor is temperature + 1e-7, as the trainer's).
func MicroBatchLoss(policy, value *decoder.Config, responseLen int, temperature float64, p LossParams) loop.LossFunc {
	sp := &spec{Policy: policy, Value: value, ResponseLen: responseLen, Temperature: temperature + 1e-7, Params: p}
	return sp.lossGraph
}
