// Package dpo is Direct Preference Optimization (Rafailov et al. 2023, arXiv:2305.18290) and its
// TRL variants: conservative DPO (label smoothing) and IPO (Azar et al. 2023, arXiv:2310.12036).
//
// Every function takes per-sequence log-probs [B] of the chosen (c) and rejected (r) completions
// under the policy (π) and the frozen reference (ref); build them from per-token log-probs with
// SeqLogProbs (sigmoid DPO) or MeanLogProbs (IPO). Reference log-probs carry no gradient.
package dpo

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/trainers/step"
)

// SeqLogProbs is log π(y|x) = Σ_t m_t·log π(y_t|x,y<t) (식 (8.1)): logps [B,T], mask [B,T] → [B].
func SeqLogProbs(logps, mask *Node) *Node { return step.SeqSum(logps, mask) }

// MeanLogProbs is the length-normalised Σ_t m_t·log π(y_t|…) / Σ_t m_t that TRL feeds to IPO
// (dpo_trainer.py concatenated_forward: `if loss_type == "ipo": all_logps /= size_completion`).
func MeanLogProbs(logps, mask *Node) *Node { return step.SeqMean(logps, mask) }

// Margin is DPO's implicit reward margin (식 (10.3)):
//
//	m = [log π(y_w) − log π_ref(y_w)] − [log π(y_l) − log π_ref(y_l)]
//
// all inputs [B] → [B]. The reference terms are detached.
func Margin(policyChosen, policyRejected, refChosen, refRejected *Node) *Node {
	return Sub(Sub(policyChosen, StopGradient(refChosen)), Sub(policyRejected, StopGradient(refRejected)))
}

// Metrics are TRL's DPO metrics, per pair [B]; Means reduces them to the logged scalars.
type Metrics struct {
	RewardsChosen   *Node // rewards/chosen   = β·(log π(y_w) − log π_ref(y_w))
	RewardsRejected *Node // rewards/rejected = β·(log π(y_l) − log π_ref(y_l))
	Accuracies      *Node // rewards/accuracies = 1 if rewards/chosen > rewards/rejected
	Margins         *Node // rewards/margins  = rewards/chosen − rewards/rejected
	LogpsChosen     *Node // logps/chosen   = log π(y_w) (as given: summed, or length-normalised for IPO)
	LogpsRejected   *Node // logps/rejected = log π(y_l)
}

// MetricNames are TRL's names of Means' entries, in order (dpo_trainer.py L1782-1805).
var MetricNames = []string{"rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
	"logps/chosen", "logps/rejected"}

// Means returns the batch means, in the order of MetricNames.
func (m Metrics) Means() []*Node {
	return []*Node{ReduceAllMean(m.RewardsChosen), ReduceAllMean(m.RewardsRejected),
		ReduceAllMean(m.Accuracies), ReduceAllMean(m.Margins),
		ReduceAllMean(m.LogpsChosen), ReduceAllMean(m.LogpsRejected)}
}

// metrics computes the implicit rewards β·log π/π_ref, detached (TRL logs them, never trains on them).
func metrics(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) Metrics {
	chosen := StopGradient(MulScalar(Sub(policyChosen, refChosen), beta))
	rejected := StopGradient(MulScalar(Sub(policyRejected, refRejected), beta))
	return Metrics{
		RewardsChosen:   chosen,
		RewardsRejected: rejected,
		Accuracies:      ConvertDType(GreaterThan(chosen, rejected), chosen.DType()),
		Margins:         Sub(chosen, rejected),
		LogpsChosen:     StopGradient(policyChosen),
		LogpsRejected:   StopGradient(policyRejected),
	}
}

// logSigmoid is log σ(x) = −softplus(−x), stable for large |x|.
func logSigmoid(x *Node) *Node { return Neg(Softplus(Neg(x))) }

// SigmoidLoss is the DPO loss (식 (10.3); TRL loss_type "sigmoid"), mean over the B pairs:
//
//	L = −(1−ε)·log σ(β·m) − ε·log σ(−β·m),   m = Margin(…)
//
// ε = labelSmoothing is TRL's conservative DPO (cDPO, Mitchell 2023): the preference label is
// assumed flipped with probability ε; ε = 0 is plain DPO. At m = 0 the loss is ln 2 and
// −∂L/∂m = β·σ(−β·m) = β/2, the course's "gradient 계수 β·σ(0) = 0.05" at β = 0.1.
func SigmoidLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta, labelSmoothing float64) (*Node, Metrics) {
	logits := MulScalar(Margin(policyChosen, policyRejected, refChosen, refRejected), beta)
	losses := Neg(logSigmoid(logits))
	if labelSmoothing != 0 {
		losses = Add(MulScalar(losses, 1-labelSmoothing), MulScalar(Neg(logSigmoid(Neg(logits))), labelSmoothing))
	}
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// IPOLoss is Identity Preference Optimisation (TRL loss_type "ipo"), mean over the B pairs:
//
//	L = (m − 1/(2β))²
//
// where, as in TRL, m is built from length-normalised log-probs (MeanLogProbs), not sums.
// The squared loss regresses the margin to 1/(2β) instead of pushing it to infinity.
func IPOLoss(policyChosenMean, policyRejectedMean, refChosenMean, refRejectedMean *Node, beta float64) (*Node, Metrics) {
	m := Margin(policyChosenMean, policyRejectedMean, refChosenMean, refRejectedMean)
	losses := Square(AddScalar(m, -1/(2*beta)))
	return ReduceAllMean(losses), metrics(policyChosenMean, policyRejectedMean, refChosenMean, refRejectedMean, beta)
}

// HingeLoss is the SLiC hinge loss (Zhao et al. 2023, arXiv:2305.10425; TRL loss_type "hinge"),
// mean over the B pairs:
//
//	L = max(0, 1 − β·m),   m = Margin(…)
//
// as TRL computes it (`torch.relu(1 - self.beta * logits)`): β plays the role of 1/δ, the margin
// the chosen response must win by; pairs already past it give no gradient.
func HingeLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) (*Node, Metrics) {
	m := Margin(policyChosen, policyRejected, refChosen, refRejected)
	losses := MaxScalar(OneMinus(MulScalar(m, beta)), 0)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// NLL is the negative log-likelihood of the chosen completions that RPO adds to the DPO loss
// (Pang et al. 2024, "Iterative Reasoning Preference Optimization", arXiv:2404.19733; TRL
// rpo_alpha, logged as nll_loss): one per-token mean over all the chosen tokens of the batch, not
// a mean of per-sequence means,
//
//	NLL = −Σ_{b,t} m_bt·log π(y_bt|x_b,y_b,<t) / Σ_{b,t} m_bt
//
// logps, mask [B,T] (the chosen rows only) → scalar; 0 when the mask is empty (TRL: NaN). TRL
// computes it from the policy's logits of the chosen rows in concatenated_forward,
// `F.cross_entropy(chosen_logits, chosen_labels, ignore_index=0)` with the labels of non-completion
// positions set to 0, so pass NLLMask's mask to leave out what TRL leaves out.
func NLL(logps, mask *Node) *Node {
	m := step.FloatMask(mask, logps.DType())
	return Div(Neg(ReduceAllSum(Mul(logps, m))), MaxScalar(ReduceAllSum(m), 1))
}

// NLLMask is the set of tokens TRL's cross-entropy counts: the completion tokens (scored [B,T])
// whose id (ids [B,T]) is not 0, because TRL marks non-completion labels with the dummy token 0
// and then passes ignore_index=0, which also drops a genuine token 0 ("!" in Qwen2's vocabulary).
func NLLMask(ids, scored *Node) *Node {
	notZero := NotEqual(ids, ZerosLike(ids))
	return LogicalAnd(step.BoolMask(scored), notZero)
}

// WithNLL is the RPO loss (TRL get_batch_loss_metrics: `losses = losses + rpo_alpha * nll_loss`,
// then the mean over pairs), for any loss type:
//
//	L_RPO = L + α·NLL
func WithNLL(loss, nll *Node, alpha float64) *Node {
	return Add(loss, MulScalar(ConvertDType(nll, loss.DType()), alpha))
}

// MeanLogits is TRL's logits/chosen (logits/rejected): the mean of the policy's logits over the
// completion tokens and the whole vocabulary (concatenated_forward:
// `logits[:num_examples][loss_mask[:num_examples]].mean()`, the [N,V] logits that score the N
// completion tokens),
//
//	logits/chosen = Σ_{b,t} m_bt·Σ_v z_{b,t−1,v} / (V·Σ_{b,t} m_bt)
//
// logitSums [B,T] holds Σ_v z at the position that scores token t (qwen2.TargetLogitSums), mask
// [B,T] the completion tokens; → scalar, detached.
func MeanLogits(logitSums, mask *Node, vocab int) *Node {
	m := step.FloatMask(mask, logitSums.DType())
	return StopGradient(Div(ReduceAllSum(Mul(logitSums, m)), MulScalar(MaxScalar(ReduceAllSum(m), 1), float64(vocab))))
}
