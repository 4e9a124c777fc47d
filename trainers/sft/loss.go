// Package sft is supervised fine-tuning: maximum likelihood on the completion tokens.
package sft

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// NLL is the SFT loss, the mean negative log-likelihood over the completion tokens of the batch:
//
//	L = −Σ_{b,t} m_bt·log π(y_bt | x_b, y_b<t) / Σ_{b,t} m_bt
//
// (TRL SFTTrainer loss_type "nll" with completion_only_loss; the course assumes SFT is done and starts
// phase 8 from its result, π_ref = SFT_PROBS). logps [B,T], mask [B,T] (bool or 0/1) → scalar.
func NLL(logps, mask *Node) *Node {
	return Neg(tokenmask.TokenMean(logps, mask))
}

// NLLOverTokens is NLL divided by an externally given token count instead of this micro-batch's:
//
//	L = −Σ_{b,t} m_bt·log π(y_bt | …) / N
//
// With N = the number of completion tokens of the whole accumulated batch, the gradients summed over
// the micro-batches equal the gradient of NLL on the full batch (TRL's num_items_in_batch; the
// "gradient accumulation" fix). numTokens is a scalar node of logps' dtype, clamped to ≥ 1.
func NLLOverTokens(logps, mask, numTokens *Node) *Node {
	n := StopGradient(MaxScalar(ConvertDType(numTokens, logps.DType()), 1))
	return Neg(Div(ReduceAllSum(tokenmask.Masked(logps, mask)), n))
}

// DFTOverTokens is Dynamic Fine-Tuning (Wu et al., "On the Generalization of SFT: A Reinforcement
// Learning Perspective with Reward Rectification", arXiv:2508.05629, the "DFT" objective): each completion
// token's NLL weighted by the probability of that token, the weight held constant (no gradient),
// summed and divided by the externally given token count N as NLLOverTokens:
//
//	L = −Σ_{b,t} m_bt·sg(π(y_bt | …))·log π(y_bt | …) / N,   ∂L/∂log π(y_bt | …) = −m_bt·π(y_bt | …) / N
//
// so each token's NLL gradient is scaled by its own probability. This is TRL v0.24's SFTTrainer
// loss_type "dft" (dft_loss in trl/trainer/sft_trainer.py, passed to HF's Trainer as
// compute_loss_func): per_token_loss = −logprobs.exp().detach()·logprobs over the labels ≠ −100
// (the same completion/assistant masks as "nll"), summed and divided by num_items_in_batch (the
// whole accumulated batch's loss tokens; the micro-batch's own count when it is None, as in eval).
// logps [B,T], mask [B,T] (bool or 0/1), numTokens scalar (clamped to ≥ 1) → scalar. Masked
// positions may hold −∞.
func DFTOverTokens(logps, mask, numTokens *Node) *Node {
	n := StopGradient(MaxScalar(ConvertDType(numTokens, logps.DType()), 1))
	lp := tokenmask.Masked(logps, mask) // [B,T]: 0 where not scored (so the weight there is 1·0)
	weight := StopGradient(Exp(lp))     // π(y_bt | …), a constant
	return Neg(Div(ReduceAllSum(tokenmask.Masked(Mul(weight, lp), mask)), n))
}

// DFT is DFTOverTokens over this batch's own completion tokens (N = Σ m_bt): TRL's dft_loss
// with num_items_in_batch None.
func DFT(logps, mask *Node) *Node {
	return DFTOverTokens(logps, mask, ReduceAllSum(tokenmask.FloatMask(mask, logps.DType())))
}

// ArgmaxCorrect returns, for logits [B,T,V] and targets [B,T] (integer token ids), the flags
// argmax_v logits[b,t,v] == targets[b,t] as a Bool [B,T] tensor (no gradient).
func ArgmaxCorrect(logits, targets *Node) *Node {
	pred := ArgMax(StopGradient(logits), -1, targets.DType())
	return Equal(pred, targets)
}

// MeanTokenAccuracy is TRL's mean_token_accuracy: the fraction of completion tokens whose argmax
// prediction is correct. correct [B,T] (bool or 0/1), mask [B,T] → scalar in [0, 1], of dtype float64.
func MeanTokenAccuracy(correct, mask *Node) *Node {
	c := tokenmask.FloatMask(correct, dtypes.Float64)
	return StopGradient(tokenmask.TokenMean(c, mask))
}

// MeanTokenEntropy is TRL's entropy metric: the mean over completion tokens of the predictive
// entropy −Σ_v p_v·log p_v, p = softmax(logits). logits [B,T,V], mask [B,T] → scalar (no gradient).
func MeanTokenEntropy(logits, mask *Node) *Node {
	lp := LogSoftmax(StopGradient(logits), -1)
	entropy := Neg(ReduceSum(Mul(Exp(lp), lp), -1)) // [B,T]
	return StopGradient(tokenmask.TokenMean(entropy, mask))
}
