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
