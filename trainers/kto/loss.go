// Package kto is Kahneman–Tversky Optimization (Ethayarajh et al. 2024, arXiv:2402.01306) as TRL's
// KTOTrainer: unpaired completions labelled desirable or undesirable, with loss_type "kto" (Loss)
// or "apo_zero_unpaired" (APOZeroUnpairedLoss).
package kto

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// LossConfig holds KTO's hyper-parameters (TRL KTOConfig defaults: β 0.1, both weights 1).
type LossConfig struct {
	Beta              float64
	DesirableWeight   float64
	UndesirableWeight float64
}

// SeqLogProbs is log π(y|x) = Σ_t m_t·log π(y_t|x,y<t) (식 (8.1)): logps [B,T], mask [B,T] → [B].
func SeqLogProbs(logps, mask *Node) *Node { return tokenmask.SeqSum(logps, mask) }

// ReferencePoint is KTO's z from the KL completions (TRL: y from another example of the batch,
// "shift by one"): z = max(0, mean_b[log π(y'_b|x_b) − log π_ref(y'_b|x_b)]), detached.
// policyKL, refKL [B] → scalar.
func ReferencePoint(policyKL, refKL *Node) *Node {
	return StopGradient(MaxScalar(ReduceAllMean(Sub(policyKL, refKL)), 0))
}

// Metrics are TRL's KTO metrics (kto_trainer.py L1442-1469), all detached scalars.
type Metrics struct {
	RewardsChosenSum   *Node // rewards/chosen_sum   = Σ_desirable β·r
	RewardsRejectedSum *Node // rewards/rejected_sum = Σ_undesirable β·r
	CountChosen        *Node // count/chosen
	CountRejected      *Node // count/rejected
	KL                 *Node // kl: the reference point z used
}

// Loss is the KTO loss (식 (10.4)), mean over the B examples as TRL's `losses.nanmean()`:
//
//	r_b = log π(y_b|x_b) − log π_ref(y_b|x_b)
//	desirable:    L_b = w_D·(1 − σ(β(r_b − z)))
//	undesirable:  L_b = w_U·(1 − σ(β(z − r_b)))
//
// policy, ref [B] per-sequence log-probs; desirable [B] bool (or 0/1); z the reference point, a
// scalar or [B] (the course uses the exact KL(π‖π_ref) of each example's prompt), which is
// detached and clamped at 0 here. −∂L_b/∂r_b = ±w·β·v(1−v) with v = σ(±β(r_b − z)), the
// course's coefficient `beta * v * (1 - v)`.
func Loss(policy, ref, desirable, z *Node, cfg LossConfig) (*Node, Metrics) {
	dtype := policy.DType()
	z = StopGradient(MaxScalar(ConvertDType(z, dtype), 0))
	if z.IsScalar() {
		z = BroadcastToDims(z, policy.Shape().Dimensions...)
	}
	r := Sub(policy, StopGradient(ref))
	good := tokenmask.BoolMask(desirable)
	lossGood := MulScalar(OneMinus(Sigmoid(MulScalar(Sub(r, z), cfg.Beta))), cfg.DesirableWeight)
	lossBad := MulScalar(OneMinus(Sigmoid(MulScalar(Sub(z, r), cfg.Beta))), cfg.UndesirableWeight)
	loss := ReduceAllMean(Where(good, lossGood, lossBad))
	return loss, rewardMetrics(r, good, cfg.Beta, ReduceAllMean(z))
}

// rewardMetrics are the KTO losses' metrics: the sums and counts of the rewards β·r of the
// desirable (good) and undesirable examples, and kl.
func rewardMetrics(r, good *Node, beta float64, kl *Node) Metrics {
	rewards := StopGradient(MulScalar(r, beta))
	bad := LogicalNot(good)
	return Metrics{
		RewardsChosenSum:   ReduceAllSum(tokenmask.Masked(rewards, good)),
		RewardsRejectedSum: ReduceAllSum(tokenmask.Masked(rewards, bad)),
		CountChosen:        ReduceAllSum(tokenmask.FloatMask(good, r.DType())),
		CountRejected:      ReduceAllSum(tokenmask.FloatMask(bad, r.DType())),
		KL:                 kl,
	}
}

// APOZeroUnpairedLoss is TRL's loss_type "apo_zero_unpaired" (KTOTrainer.kto_loss), the unpaired
// variant of APO-zero (D'Oosterlinck et al. 2024, "Anchored Preference Optimization",
// arXiv:2408.06266, eq. (7)), mean over the B examples as TRL's `losses.nanmean()`:
//
//	r_b = log π(y_b|x_b) − log π_ref(y_b|x_b)
//	desirable:    L_b = w_D·(1 − σ(β·r_b))
//	undesirable:  L_b = w_U·σ(β·r_b)
//
// Desirable completions are pushed above the reference and undesirable ones below it, each anchored
// at r = 0 rather than at KTO's reference point: TRL sets calculate_KL = False for this loss, builds
// no KL completions and logs kl = 0 (Metrics.KL here). policy, ref [B]; desirable [B] bool (or 0/1).
// −∂L_b/∂r_b = ±w·β·v(1−v) with v = σ(β·r_b).
func APOZeroUnpairedLoss(policy, ref, desirable *Node, cfg LossConfig) (*Node, Metrics) {
	dtype := policy.DType()
	r := Sub(policy, StopGradient(ref))
	good := tokenmask.BoolMask(desirable)
	v := Sigmoid(MulScalar(r, cfg.Beta))
	lossGood := MulScalar(OneMinus(v), cfg.DesirableWeight)
	lossBad := MulScalar(v, cfg.UndesirableWeight)
	loss := ReduceAllMean(Where(good, lossGood, lossBad))
	return loss, rewardMetrics(r, good, cfg.Beta, ScalarZero(policy.Graph(), dtype))
}

// RowLogitSums is what TRL's logits/chosen_sum and logits/rejected_sum add up per example: its
// policy logits summed over the vocabulary and every position of the row (prompt and completion;
// KTOTrainer.forward keeps `completion_logits[chosen_idx, ...]` whole and get_batch_loss_metrics
// takes its `.nansum()`; Gemma 3's soft-capped logits with final_logit_softcapping),
//
//	logits/chosen_sum = Σ_{b chosen} Σ_t m_bt·Σ_v z_{b,t,v}
//
// logitSums [B,T] is Σ_v z per position (decoder.LogitSums), mask [B,T] the real (non-padding)
// positions; → [B], detached. TRL also sums the logits at its padding positions, which depend on
// the batch; here only the row's own positions count.
func RowLogitSums(logitSums, mask *Node) *Node {
	return StopGradient(ReduceSum(Mul(logitSums, tokenmask.FloatMask(mask, logitSums.DType())), -1))
}
