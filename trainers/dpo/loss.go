// Package dpo is Direct Preference Optimization (Rafailov et al. 2023, arXiv:2305.18290) and its
// TRL variants (DPOConfig loss_type): conservative DPO (label smoothing), IPO (Azar et al. 2023,
// arXiv:2310.12036), hinge, robust, exo_pair, nca_pair, sppo_hard, aot, aot_pair, discopop,
// apo_zero, apo_down and sft, one named function each; Combine sums several with loss_weights.
//
// Every function takes per-sequence log-probs [B] of the chosen (c) and rejected (r) completions
// under the policy (π) and the frozen reference (ref); build them from per-token log-probs with
// SeqLogProbs (sigmoid DPO) or MeanLogProbs (IPO). Reference log-probs carry no gradient.
package dpo

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// SeqLogProbs is log π(y|x) = Σ_t m_t·log π(y_t|x,y<t) (식 (8.1)): logps [B,T], mask [B,T] → [B].
func SeqLogProbs(logps, mask *Node) *Node { return tokenmask.SeqSum(logps, mask) }

// MeanLogProbs is the length-normalised Σ_t m_t·log π(y_t|…) / Σ_t m_t that TRL feeds to IPO
// (dpo_trainer.py concatenated_forward: `if loss_type == "ipo": all_logps /= size_completion`).
func MeanLogProbs(logps, mask *Node) *Node { return tokenmask.SeqMean(logps, mask) }

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

// MetricNames are TRL's names of the batch means (dpo_trainer.py L1782-1805), in Means' order.
var MetricNames = []string{"rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
	"logps/chosen", "logps/rejected"}

// Named returns the batch means by their TRL names (MetricNames).
func (m Metrics) Named() map[string]*Node {
	return map[string]*Node{
		"rewards/chosen":     ReduceAllMean(m.RewardsChosen),
		"rewards/rejected":   ReduceAllMean(m.RewardsRejected),
		"rewards/accuracies": ReduceAllMean(m.Accuracies),
		"rewards/margins":    ReduceAllMean(m.Margins),
		"logps/chosen":       ReduceAllMean(m.LogpsChosen),
		"logps/rejected":     ReduceAllMean(m.LogpsRejected),
	}
}

// Means returns the batch means in the order of MetricNames (the hand checks' outputs).
func (m Metrics) Means() []*Node {
	named := m.Named()
	out := make([]*Node, len(MetricNames))
	for i, name := range MetricNames {
		out[i] = named[name]
	}
	return out
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
	losses := sigmoidLosses(Margin(policyChosen, policyRejected, refChosen, refRejected), beta, labelSmoothing)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// sigmoidLosses are SigmoidLoss's per-pair losses [B] on TRL's dpo_loss logits z [B] (the margin
// m, or a Logits variant).
func sigmoidLosses(z *Node, beta, eps float64) *Node {
	return smoothedLogistic(MulScalar(z, beta), eps)
}

// IPOLoss is Identity Preference Optimisation (TRL loss_type "ipo"), mean over the B pairs:
//
//	L = (m − 1/(2β))²
//
// where, as in TRL, m is built from length-normalised log-probs (MeanLogProbs), not sums.
// The squared loss regresses the margin to 1/(2β) instead of pushing it to infinity.
func IPOLoss(policyChosenMean, policyRejectedMean, refChosenMean, refRejectedMean *Node, beta float64) (*Node, Metrics) {
	losses := ipoLosses(Margin(policyChosenMean, policyRejectedMean, refChosenMean, refRejectedMean), beta)
	return ReduceAllMean(losses), metrics(policyChosenMean, policyRejectedMean, refChosenMean, refRejectedMean, beta)
}

// ipoLosses are IPOLoss's per-pair losses [B] on the logits z [B].
func ipoLosses(z *Node, beta float64) *Node { return Square(AddScalar(z, -1/(2*beta))) }

// HingeLoss is the SLiC hinge loss (Zhao et al. 2023, arXiv:2305.10425; TRL loss_type "hinge"),
// mean over the B pairs:
//
//	L = max(0, 1 − β·m),   m = Margin(…)
//
// as TRL computes it (`torch.relu(1 - self.beta * logits)`): β plays the role of 1/δ, the margin
// the chosen response must win by; pairs already past it give no gradient.
func HingeLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) (*Node, Metrics) {
	losses := hingeLosses(Margin(policyChosen, policyRejected, refChosen, refRejected), beta)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// hingeLosses are HingeLoss's per-pair losses [B] on the logits z [B].
func hingeLosses(z *Node, beta float64) *Node { return MaxScalar(OneMinus(MulScalar(z, beta)), 0) }

// logRatios are the per-pair log-ratios against the reference, c = log π(y_w) − log π_ref(y_w)
// and r = log π(y_l) − log π_ref(y_l), [B] each, the reference detached.
func logRatios(policyChosen, policyRejected, refChosen, refRejected *Node) (c, r *Node) {
	return Sub(policyChosen, StopGradient(refChosen)), Sub(policyRejected, StopGradient(refRejected))
}

// smoothedLogistic is cDPO's per-pair −(1−ε)·log σ(z) − ε·log σ(−z) for z [B]; ε = 0 leaves −log σ(z).
func smoothedLogistic(z *Node, eps float64) *Node {
	losses := Neg(logSigmoid(z))
	if eps != 0 {
		losses = Add(MulScalar(losses, 1-eps), MulScalar(Neg(logSigmoid(Neg(z))), eps))
	}
	return losses
}

// RobustLoss is robust DPO (Chowdhury et al. 2024, arXiv:2403.00409; TRL loss_type "robust"), an
// unbiased estimate of the DPO loss when each label is flipped with probability ε, mean over B:
//
//	L = [−(1−ε)·log σ(β·m) + ε·log σ(−β·m)] / (1 − 2ε),   m = Margin(…), ε ∈ [0, ½)
//
// ε = 0 is the sigmoid loss. Unlike cDPO the ε term enters with a plus sign, so L can be negative.
func RobustLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta, eps float64) (*Node, Metrics) {
	losses := robustLosses(Margin(policyChosen, policyRejected, refChosen, refRejected), beta, eps)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// robustLosses are RobustLoss's per-pair losses [B] on the logits z [B].
func robustLosses(z *Node, beta, eps float64) *Node {
	bz := MulScalar(z, beta)
	losses := Add(MulScalar(Neg(logSigmoid(bz)), 1-eps), MulScalar(logSigmoid(Neg(bz)), eps))
	return DivScalar(losses, 1-2*eps)
}

// ExoPairLoss is pairwise EXO (Ji et al. 2024, arXiv:2402.00856, eq. 16; TRL loss_type
// "exo_pair"), the reverse KL from the ε-smoothed preference label to σ(β·m), mean over B:
//
//	L = σ(β·m)·[log σ(β·m) − log(1−ε)] + σ(−β·m)·[log σ(−β·m) − log ε]
//
// ε must be in (0, ½); TRL replaces label_smoothing 0 by 1e-3 (the trainer does the same).
func ExoPairLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta, eps float64) (*Node, Metrics) {
	losses := exoPairLosses(Margin(policyChosen, policyRejected, refChosen, refRejected), beta, eps)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// exoPairLosses are ExoPairLoss's per-pair losses [B] on the logits z [B].
func exoPairLosses(z *Node, beta, eps float64) *Node {
	bz := MulScalar(z, beta)
	win := Mul(Sigmoid(bz), AddScalar(logSigmoid(bz), -math.Log(1-eps)))
	lose := Mul(Sigmoid(Neg(bz)), AddScalar(logSigmoid(Neg(bz)), -math.Log(eps)))
	return Add(win, lose)
}

// NCAPairLoss is pairwise NCA (Chen et al. 2024, arXiv:2402.05369; TRL loss_type "nca_pair"), on
// the rewards of each response against the reference rather than their difference, mean over B:
//
//	L = −log σ(β·c) − ½·log σ(−β·c) − ½·log σ(−β·r),   c, r = the chosen and rejected log-ratios
//
// so the chosen likelihood is pushed up in absolute terms, not only relative to the rejected one.
func NCAPairLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) (*Node, Metrics) {
	losses := ncaPairLosses(policyChosen, policyRejected, refChosen, refRejected, beta)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// ncaPairLosses are NCAPairLoss's per-pair losses [B].
func ncaPairLosses(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) *Node {
	c, r := logRatios(policyChosen, policyRejected, refChosen, refRejected)
	bc, br := MulScalar(c, beta), MulScalar(r, beta)
	return Sub(Sub(Neg(logSigmoid(bc)), MulScalar(logSigmoid(Neg(bc)), 0.5)), MulScalar(logSigmoid(Neg(br)), 0.5))
}

// SPPOHardLoss is SPPO with hard labels (Wu et al. 2024, arXiv:2405.00675, eq. 4.7 with P = 1 for
// the winner and 0 for the loser; TRL loss_type "sppo_hard"), mean over B:
//
//	L = (c − 1/(2β))² + (r + 1/(2β))²,   c, r = the chosen and rejected log-ratios
//
// each response's log-ratio is regressed to ±1/(2β) on its own, not their margin as in IPO.
func SPPOHardLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) (*Node, Metrics) {
	losses := sppoHardLosses(policyChosen, policyRejected, refChosen, refRejected, beta)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// sppoHardLosses are SPPOHardLoss's per-pair losses [B].
func sppoHardLosses(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) *Node {
	c, r := logRatios(policyChosen, policyRejected, refChosen, refRejected)
	return Add(Square(AddScalar(c, -0.5/beta)), Square(AddScalar(r, 0.5/beta)))
}

// AOTLoss is alignment via optimal transport for paired data (Melnyk et al. 2024,
// arXiv:2406.05882; TRL loss_type "aot"): the cDPO loss on the difference of the *sorted* policy
// and reference log-ratio margins of the micro-batch, mean over B:
//
//	δ = sort_B(log π(y_w) − log π(y_l)) − sort_B(log π_ref(y_w) − log π_ref(y_l))
//	L = −(1−ε)·log σ(β·δ) − ε·log σ(−β·δ)
//
// Sorting couples the pairs of a micro-batch (first-order stochastic dominance), so the loss
// depends on per_device_train_batch_size as TRL's does.
func AOTLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta, eps float64) (*Node, Metrics) {
	return ReduceAllMean(aotLosses(policyChosen, policyRejected, refChosen, refRejected, beta, eps)),
		metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// aotLosses are AOTLoss's per-pair losses [B].
func aotLosses(policyChosen, policyRejected, refChosen, refRejected *Node, beta, eps float64) *Node {
	delta := Sub(sortAscending(Sub(policyChosen, policyRejected)), StopGradient(sortAscending(Sub(refChosen, refRejected))))
	return smoothedLogistic(MulScalar(delta, beta), eps)
}

// AOTPairLoss is AOT for unpaired data (TRL loss_type "aot_pair"): as AOTLoss, but the chosen and
// rejected log-ratios are sorted separately over the micro-batch,
//
//	δ = sort_B(c) − sort_B(r),   L = −(1−ε)·log σ(β·δ) − ε·log σ(−β·δ)
func AOTPairLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta, eps float64) (*Node, Metrics) {
	return ReduceAllMean(aotPairLosses(policyChosen, policyRejected, refChosen, refRejected, beta, eps)),
		metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// aotPairLosses are AOTPairLoss's per-pair losses [B].
func aotPairLosses(policyChosen, policyRejected, refChosen, refRejected *Node, beta, eps float64) *Node {
	c, r := logRatios(policyChosen, policyRejected, refChosen, refRejected)
	return smoothedLogistic(MulScalar(Sub(sortAscending(c), sortAscending(r)), beta), eps)
}

// sortAscending is torch.sort(x, dim=0).values for x [B] (GoMLX has no sort op): each element's
// rank is the number of elements before it (smaller, or equal with a lower index), and a one-hot
// permutation places it; the gradient of each sorted entry flows back to the element placed there.
// O(B²), fine for micro-batch sizes.
func sortAscending(x *Node) *Node {
	g, n := x.Graph(), x.Shape().Dim(0)
	xs := StopGradient(x)
	self := BroadcastToDims(Reshape(xs, n, 1), n, n)  // [i,j] = x_i
	other := BroadcastToDims(Reshape(xs, 1, n), n, n) // [i,j] = x_j
	idx := shapes.Make(dtypes.Int32, n, n)
	lowerIndex := LessThan(Iota(g, idx, 1), Iota(g, idx, 0)) // j < i
	before := LogicalOr(LessThan(other, self), LogicalAnd(Equal(other, self), lowerIndex))
	rank := ReduceSum(ConvertDType(before, dtypes.Int32), 1)                    // [i]
	place := Equal(BroadcastToDims(Reshape(rank, n, 1), n, n), Iota(g, idx, 1)) // [i,k]
	perm := StopGradient(ConvertDType(place, x.DType()))                        // [i,k]
	return ReduceSum(Mul(perm, BroadcastToDims(Reshape(x, n, 1), n, n)), 0)     // [k]
}

// DiscoPOPLoss is DiscoPOP, the log-ratio modulated loss found by LLM-driven discovery (Lu et al.
// 2024, arXiv:2406.08414, eq. 5; TRL loss_type "discopop"), mean over B:
//
//	z = β·m,   w = σ(z/τ),   L = (1−w)·(−log σ(z)) + w·exp(−z)
//
// a blend of the logistic (DPO) and exponential losses, τ = discopop_tau (paper: 0.05).
func DiscoPOPLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta, tau float64) (*Node, Metrics) {
	losses := discoPOPLosses(policyChosen, policyRejected, refChosen, refRejected, beta, tau)
	return ReduceAllMean(losses), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// discoPOPLosses are DiscoPOPLoss's per-pair losses [B].
func discoPOPLosses(policyChosen, policyRejected, refChosen, refRejected *Node, beta, tau float64) *Node {
	z := MulScalar(Margin(policyChosen, policyRejected, refChosen, refRejected), beta)
	w := Sigmoid(DivScalar(z, tau))
	return Add(Mul(Neg(logSigmoid(z)), OneMinus(w)), Mul(Exp(Neg(z)), w))
}

// APOZeroLoss is APO-zero (D'Oosterlinck et al. 2024, arXiv:2408.06266, eq. 7; TRL loss_type
// "apo_zero"), for chosen outputs better than the model's own: raise the chosen likelihood, lower
// the rejected one, each against the reference, mean over B:
//
//	L = (1 − σ(β·c)) + σ(β·r)
func APOZeroLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) (*Node, Metrics) {
	c, r := logRatios(policyChosen, policyRejected, refChosen, refRejected)
	return ReduceAllMean(apoZeroLosses(c, r, beta)), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// apoZeroLosses are APOZeroLoss's per-pair losses [B] on the log-ratios c, r [B].
func apoZeroLosses(c, r *Node, beta float64) *Node {
	return Add(OneMinus(Sigmoid(MulScalar(c, beta))), Sigmoid(MulScalar(r, beta)))
}

// APODownLoss is APO-down (arXiv:2408.06266, eq. 8; TRL loss_type "apo_down"), for chosen outputs
// worse than the model's own: lower the chosen likelihood, and the rejected one more, mean over B:
//
//	L = σ(β·c) + (1 − σ(β·(c − r)))
func APODownLoss(policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) (*Node, Metrics) {
	c, r := logRatios(policyChosen, policyRejected, refChosen, refRejected)
	return ReduceAllMean(apoDownLosses(c, r, beta)), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
}

// apoDownLosses are APODownLoss's per-pair losses [B] on the log-ratios c, r [B].
func apoDownLosses(c, r *Node, beta float64) *Node {
	return Add(Sigmoid(MulScalar(c, beta)), OneMinus(Sigmoid(MulScalar(Sub(c, r), beta))))
}

// SFTLoss is TRL's loss_type "sft" (the generation term of MPO, Wang et al. 2024,
// arXiv:2411.10442): the chosen completions' NLL (NLL over NLLMask), the same for every pair, so
// its mean over B is nll itself. The metrics are the pairs' implicit rewards, as TRL logs them.
func SFTLoss(nll, policyChosen, policyRejected, refChosen, refRejected *Node, beta float64) (*Node, Metrics) {
	return ConvertDType(nll, policyChosen.DType()), metrics(policyChosen, policyRejected, refChosen, refRejected, beta)
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
	m := tokenmask.FloatMask(mask, logps.DType())
	return Div(Neg(ReduceAllSum(Mul(logps, m))), MaxScalar(ReduceAllSum(m), 1))
}

// NLLMask is the set of tokens TRL's cross-entropy counts: the completion tokens (scored [B,T])
// whose id (ids [B,T]) is not 0, because TRL marks non-completion labels with the dummy token 0
// and then passes ignore_index=0, which also drops a genuine token 0 ("!" in Qwen2's vocabulary).
func NLLMask(ids, scored *Node) *Node {
	notZero := NotEqual(ids, ZerosLike(ids))
	return LogicalAnd(tokenmask.BoolMask(scored), notZero)
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
// z are the logits the model outputs (Gemma 3's soft-capped c·tanh(z/c) with
// final_logit_softcapping, as TRL sees them). logitSums [B,T] holds Σ_v z at the position that
// scores token t (decoder.TargetLogitSums), mask [B,T] the completion tokens; → scalar, detached.
func MeanLogits(logitSums, mask *Node, vocab int) *Node {
	m := tokenmask.FloatMask(mask, logitSums.DType())
	return StopGradient(Div(ReduceAllSum(Mul(logitSums, m)), MulScalar(MaxScalar(ReduceAllSum(m), 1), float64(vocab))))
}
