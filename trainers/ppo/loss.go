package ppo

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// InvalidLogProb is TRL's INVALID_LOGPROB: the log-prob written at the response positions after
// a row's end (padding_mask), so that their ratio is exp(1 − 1) = 1 and their KL 0.
const InvalidLogProb = 1.0

// LossInputs are one micro-batch's tensors of the PPO loss, [B,R] float32 each (R the response
// width), as TRL's PPOTrainer.train computes them (ppo_trainer.py, the inner loop):
type LossInputs struct {
	LogProbs    *Node // new log-probs at logits/(T+1e-7), InvalidLogProb on padding (differentiated)
	OldLogProbs *Node // the rollout's, InvalidLogProb on padding
	Advantages  *Node // whitened GAE advantages, 0 on padding
	VPred       *Node // the value head now, 0 on padding_mask_p1 (differentiated)
	Values      *Node // the rollout's values, 0 on padding_mask_p1
	Returns     *Node // advantages + values before whitening
	PGMask      *Node // 1 = ~padding_mask (the response's tokens)
	VFMask      *Node // 1 = ~padding_mask_p1 (the tokens and the one after)
	Cols        *Node // 1 = a column of the rollout's generated width (TRL's tensors' extent)
	Entropy     *Node // per-token entropy of the tempered distribution (detached)
}

// LossParams are PPOConfig's coefficients of the loss.
type LossParams struct {
	Cliprange, CliprangeValue, VFCoef float64
}

// LossStats are a micro-batch's statistics under TRL's names (each a float32 scalar).
type LossStats struct {
	PGLoss, VFLoss, PGClipfrac, VFClipfrac, ApproxKL, Entropy, Ratio *Node
}

// Loss is TRL's PPO objective on one micro-batch (Schulman et al. 2017, arXiv:1707.06347, eq. 7
// and 9; course 식 (7.2) per token):
//
//	ρ = exp(logp − logp_old)
//	pg_loss = masked_mean(max(−A·ρ, −A·clip(ρ, 1−ε, 1+ε)), ~padding_mask)
//	v_clip  = clamp(v, v_old − ε_v, v_old + ε_v)
//	vf_loss = 0.5 · masked_mean(max((v − R)², (v_clip − R)²), ~padding_mask_p1)
//	loss    = pg_loss + vf_coef · vf_loss
//
// and its statistics: the clip fractions (masked means of the clipped term being the larger),
// approxkl = 0.5·mean((logp − logp_old)²) and the mean ratio and entropy over every position of
// the micro-batch (padding included, as TRL's .mean()).
func Loss(in LossInputs, p LossParams) (loss *Node, st LossStats) {
	diff := Sub(in.LogProbs, in.OldLogProbs)
	ratio := Exp(diff)
	// max(−A·ρ, −A·clip(ρ)) = −min(ρ·A, clip(ρ)·A): the clipped surrogate GRPO shares.
	st.PGLoss = MaskedMean(rl.ClippedSurrogate(ratio, in.Advantages, p.Cliprange, p.Cliprange), in.PGMask)
	r := StopGradient(ratio)
	pg1 := Mul(Neg(in.Advantages), r)
	pg2 := Mul(Neg(in.Advantages), clamp(r, ScalarLike(r, 1-p.Cliprange), ScalarLike(r, 1+p.Cliprange)))

	vclip := clamp(in.VPred, AddScalar(in.Values, -p.CliprangeValue), AddScalar(in.Values, p.CliprangeValue))
	vf1 := Square(Sub(in.VPred, in.Returns))
	vf2 := Square(Sub(vclip, in.Returns))
	st.VFLoss = MulScalar(MaskedMean(Max(vf1, vf2), in.VFMask), 0.5)

	loss = Add(st.PGLoss, MulScalar(st.VFLoss, p.VFCoef))
	frac := func(x *Node) *Node { return StopGradient(ConvertDType(x, dtypes.Float32)) }
	st.PGClipfrac = MaskedMean(frac(GreaterThan(pg2, pg1)), in.PGMask)
	st.VFClipfrac = MaskedMean(frac(GreaterThan(vf2, vf1)), in.VFMask)
	d := StopGradient(diff)
	st.ApproxKL = MulScalar(MaskedMean(Square(d), in.Cols), 0.5)
	st.Ratio = MaskedMean(StopGradient(ratio), in.Cols)
	st.Entropy = MaskedMean(StopGradient(in.Entropy), in.Cols)
	st.PGLoss, st.VFLoss = StopGradient(st.PGLoss), StopGradient(st.VFLoss)
	return loss, st
}

// clamp is torch.clamp(x, lo, hi) = min(max(x, lo), hi), with the gradient of x inside the range
// (GoMLX's Clamp has none).
func clamp(x, lo, hi *Node) *Node {
	return Min(Max(x, BroadcastToShape(lo, x.Shape())), BroadcastToShape(hi, x.Shape()))
}

// ScalarLike is the scalar v in x's dtype.
func ScalarLike(x *Node, v float64) *Node { return Scalar(x.Graph(), x.DType(), v) }

// MaskedMean is TRL's masked_mean over every entry: Σ x·m / Σ m (NaN when the mask is empty, as
// TRL's).
func MaskedMean(x, mask *Node) *Node {
	return Div(ReduceAllSum(Mul(x, mask)), ReduceAllSum(mask))
}
