// Package grpo is Group Relative Policy Optimization (Shao et al. 2024, DeepSeekMath,
// arXiv:2402.03300) as TRL v0.24's GRPOTrainer computes its loss, with the variants of the
// course's phase 12 as named functions: the importance ratio level (TokenRatio, SequenceRatio =
// GSPO, SequenceTokenRatio = GSPO-token) and the aggregation (GRPOMean, BNPOMean, DAPOMean,
// DrGRPOMean, and SequenceSumMean for plain REINFORCE).
//
// Inputs are per-token tensors [B,T]: logps (current policy, with gradient), oldLogps (the
// sampling policy π_old; pass StopGradient(logps) when μ = 1, which makes the ratio 1 but keeps
// its gradient, TRL #2995), refLogps (π_ref; nil when β = 0), mask (bool or 0/1, completion
// tokens), and advantages [B] (host-side group advantages, 식 (11.1)) or [B,T] (per-token GAE
// advantages: PPO of phase 9 is TokenRatio + BNPOMean with β = 0).
//
// The package is also GRPO's trainer on a policy of any decoder family (Trainer, Run): the step source that the
// training driver (trainers/engine/loop) runs. It generates and rewards the rollouts (rollout.go,
// rewards.go), computes their advantages and old/reference log-probs, feeds each optimizer step's
// micro-batches (graph.go), syncs the reference (refsync.go), evaluates by generating (eval.go),
// and adds its own state to the driver's checkpoints (checkpoint.go) and its completions files to
// the driver's logs (runlog.go); the driver owns the steps, the schedule, the cadence of logging,
// evaluation and saving, resume and Ctrl-C.
package grpo

import (
	"math"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// Ratio computes the importance ratio π/π_old from per-token log-probs, [B,T] → [B,T] (token
// level) or [B,1] (sequence level).
type Ratio func(logps, oldLogps, mask *Node) *Node

// TokenRatio is GRPO's per-token ratio ρ_t = exp(log π(y_t|…) − log π_old(y_t|…)) (식 (11.2)).
func TokenRatio(logps, oldLogps, mask *Node) *Node {
	return Exp(tokenmask.Masked(Sub(logps, StopGradient(oldLogps)), mask))
}

// SequenceRatio is GSPO's sequence ratio (Zheng et al. 2025, arXiv:2507.18071; TRL
// importance_sampling_level "sequence"), the geometric mean of the token ratios, [B,T] → [B,1]:
//
//	s = exp( Σ_t m_t·(log π(y_t|…) − log π_old(y_t|…)) / Σ_t m_t )
//
// shared by all tokens of the sequence; ∂s/∂log π_t = s/|y| (the course's phase 12 note).
func SequenceRatio(logps, oldLogps, mask *Node) *Node {
	logRatio := tokenmask.SeqMean(Sub(logps, StopGradient(oldLogps)), mask)
	return InsertAxes(Exp(logRatio), -1)
}

// SequenceTokenRatio is GSPO-token (Zheng et al. 2025 §4.3): the value of SequenceRatio on every
// token, s_t = sg[s]·π_t/sg[π_t], but with each token's own gradient ∂s_t/∂log π_t = s instead of
// s/|y| — token-level advantages become possible while the clipping stays sequence-level. [B,T] →
// [B,T]. (Not in TRL v0.24, whose "sequence" level is SequenceRatio.)
func SequenceTokenRatio(logps, oldLogps, mask *Node) *Node {
	logS := StopGradient(tokenmask.SeqMean(Sub(logps, StopGradient(oldLogps)), mask)) // [B]
	dims := logps.Shape().Dimensions
	tokenPart := tokenmask.Masked(Sub(logps, StopGradient(logps)), mask) // value 0, gradient 1
	return Exp(Add(BroadcastToDims(InsertAxes(logS, -1), dims...), tokenPart))
}

// Aggregation reduces the per-token loss [B,T] to the scalar loss. Under gradient accumulation
// TRL v0.24 further divides grpo, bnpo and dr_grpo (not dapo) by the number of accumulation
// steps; that scaling belongs to the caller's accumulation loop, not to these functions.
type Aggregation func(perToken, mask *Node) *Node

// GRPOMean is TRL loss_type "grpo" (the course's agg "seq_mean"): the mean over each sequence's
// tokens, then the mean over the B sequences — token weight 1/(B·|y_b|).
func GRPOMean(perToken, mask *Node) *Node {
	return ReduceAllMean(tokenmask.SeqMean(perToken, mask))
}

// SequenceSumMean is REINFORCE's weighting (식 (8.3), phase 8): the sum over each sequence's
// tokens (= log π(y|x) for the sequence), then the mean over the B sequences — token weight 1/B.
// With TokenRatio at ρ = 1 its gradient is −mean_b A_b·∇log π(y_b|x_b).
func SequenceSumMean(perToken, mask *Node) *Node {
	return ReduceAllMean(tokenmask.SeqSum(perToken, mask))
}

// BNPOMean is TRL loss_type "bnpo" (the course's agg "token_mean"): the mean over all completion
// tokens of this batch — token weight 1/Σ|y_b|.
func BNPOMean(perToken, mask *Node) *Node {
	return tokenmask.TokenMean(perToken, mask)
}

// DAPOMean is TRL loss_type "dapo" (Yu et al. 2025, arXiv:2503.14476): the token sum divided by
// numTokens, the number of completion tokens of the whole accumulated batch (all micro-batches and
// processes: TRL's num_items_in_batch), so that gradient accumulation does not change the weights.
// With numTokens = this batch's token count it equals BNPOMean. numTokens: scalar node, any dtype.
func DAPOMean(numTokens *Node) Aggregation {
	return func(perToken, mask *Node) *Node {
		n := StopGradient(MaxScalar(ConvertDType(numTokens, perToken.DType()), 1))
		return Div(ReduceAllSum(tokenmask.Masked(perToken, mask)), n)
	}
}

// DrGRPOMean is TRL loss_type "dr_grpo" (Liu et al. 2025, "Understanding R1-Zero-like training",
// arXiv:2503.20783; the course's agg "const"): the token sum divided by the constant
// B·maxCompletionLength, so longer answers are not down-weighted — token weight 1/(B·L_max).
func DrGRPOMean(maxCompletionLength int) Aggregation {
	return func(perToken, mask *Node) *Node {
		b := perToken.Shape().Dimensions[0]
		return DivScalar(ReduceAllSum(tokenmask.Masked(perToken, mask)), float64(b*maxCompletionLength))
	}
}

// Params are the hyper-parameters the loss needs (TRL GRPOConfig epsilon, epsilon_high, delta,
// beta).
type Params struct {
	EpsLow, EpsHigh float64 // ratio clipped to [1−EpsLow, 1+EpsHigh]
	// Delta > 0 caps the unclipped ratio at Delta (two-sided clipping, TwoSidedClippedSurrogate);
	// 0 = off (TRL's None).
	Delta float64
	Beta  float64 // KL coefficient; 0 = no reference model
	// Surrogate is the per-token policy term: "" the clipped surrogate (loss types grpo, bnpo,
	// dr_grpo, dapo, luspo), or TRL 1.x's "cispo", "sapo" or "vespo" (CISPOSurrogate,
	// SAPOSurrogate, VESPOSurrogate).
	Surrogate string
	// BiasCorrectionKL multiplies the per-token KL term by the importance ratio (with its
	// gradient), TRL 1.x's use_bias_correction_kl (DeepSeek-V3.2's unbiased reverse-KL gradient).
	BiasCorrectionKL bool
	// SAPOTempPos and SAPOTempNeg are SAPO's τ for positive and other advantages (TRL 1.16
	// sapo_temperature_pos 1.0, sapo_temperature_neg 1.05).
	SAPOTempPos, SAPOTempNeg float64
	VESPO                    VESPOParams
}

// VESPOParams are VESPO's gamma weighting's shape (TRL 1.16 vespo_k_pos 2, vespo_lambda_pos 3,
// vespo_k_neg 3, vespo_lambda_neg 2): k and λ for advantages ≥ 0 and < 0.
type VESPOParams struct{ KPos, LambdaPos, KNeg, LambdaNeg float64 }

// Inputs are the loss's tensors; see the package comment for shapes.
type Inputs struct {
	LogProbs, OldLogProbs, RefLogProbs, Mask, Advantages *Node
	// EntropyMask [B,T] (bool or 0/1), when set, multiplies the clipped surrogate before the KL
	// term is added (TRL top_entropy_quantile: HighEntropyMask); the aggregation still divides by
	// Mask's tokens. nil = every token.
	EntropyMask *Node
}

// Metrics are TRL's per-step GRPO metrics (grpo_trainer.py L1720-1779), detached scalars.
type Metrics struct {
	ClipRatioLow    *Node // clip_ratio/low_mean:    ρ < 1−ε_low and A < 0
	ClipRatioHigh   *Node // clip_ratio/high_mean:   ρ > 1+ε_high and A > 0
	ClipRatioRegion *Node // clip_ratio/region_mean: either
	KL              *Node // kl: mean k3 over completion tokens (0 when β = 0)
	// CISPOClip is cispo_clip_ratio (loss type cispo): ρ > ε_high and A > 0.
	CISPOClip *Node
	// VESPOPhiMean is vespo/phi_seq_mean (loss type vespo): the mean gamma weight.
	VESPOPhiMean *Node
}

// KLk3 is the per-token k3 estimator of KL(π‖π_ref) (Schulman 2020; TRL grpo_trainer.py L1683):
//
//	k3_t = exp(log π_ref − log π) − (log π_ref − log π) − 1  ≥ 0
//
// [B,T] → [B,T], masked positions 0. Its gradient w.r.t. log π_t is 1 − π_ref/π, so β·k3 in the
// loss gives the course's ascent coefficient −β(1 − π_ref/π).
func KLk3(logps, refLogps, mask *Node) *Node {
	d := tokenmask.Masked(Sub(StopGradient(refLogps), logps), mask)
	return Sub(Sub(Exp(d), d), OnesLike(d))
}

// Loss is the GRPO loss (식 (11.2)):
//
//	ℓ_t = −keep_t·min(ρ_t·A_b, clip(ρ_t, 1−ε_low, 1+ε_high)·A_b) + β·k3_t,   L = agg(ℓ, mask)
//
// (ρ_t in the first term capped at δ when Params.Delta > 0: TwoSidedClippedSurrogate; keep_t =
// Inputs.EntropyMask, 1 when nil) with ρ from ratio (TokenRatio or SequenceRatio) and agg one of GRPOMean, BNPOMean, DAPOMean(n),
// DrGRPOMean(L). The course's variants: GRPO = TokenRatio+GRPOMean, DAPO = BNPOMean (one
// accumulation step) with EpsHigh 0.28, Dr. GRPO = DrGRPOMean(3) with mean-only advantages,
// GSPO = SequenceRatio+GRPOMean, RLOO = GRPOMean with leave-one-out advantages.
func Loss(in Inputs, p Params, ratio Ratio, agg Aggregation) (*Node, Metrics) {
	logps := in.LogProbs
	if p.Beta != 0 && in.RefLogProbs == nil {
		panic("grpo: Params.Beta ≠ 0 needs Inputs.RefLogProbs (the reference model's per-token log-probs)")
	}
	rho := ratio(logps, in.OldLogProbs, in.Mask)
	coef := rho // TRL's coef_1, before any cap
	var perToken, phi *Node
	switch {
	case p.Surrogate == "cispo":
		perToken = CISPOSurrogate(rho, logps, in.Advantages, p.EpsHigh)
	case p.Surrogate == "sapo":
		perToken = SAPOSurrogate(rho, in.Advantages, p.SAPOTempPos, p.SAPOTempNeg)
	case p.Surrogate == "vespo":
		phi = VESPOWeights(logps, in.OldLogProbs, in.Mask, in.Advantages, p.VESPO)
		perToken = Neg(Mul(Mul(phi, advantagesColumn(in.Advantages, logps.DType())), logps))
	case p.Delta > 0:
		perToken = rl.TwoSidedClippedSurrogate(rho, in.Advantages, p.EpsLow, p.EpsHigh, p.Delta)
		rho = MinScalar(rho, p.Delta) // TRL's clip metrics see the capped coef_1
	default:
		perToken = rl.ClippedSurrogate(rho, in.Advantages, p.EpsLow, p.EpsHigh)
	}
	if !slices.Equal(perToken.Shape().Dimensions, logps.Shape().Dimensions) {
		perToken = BroadcastToDims(perToken, logps.Shape().Dimensions...) // sequence ratio: [B,1] → [B,T]
	}
	if in.EntropyMask != nil { // ℓ_t ← keep_t·ℓ_t (TRL: per_token_loss * entropy_mask)
		perToken = Mul(perToken, ConvertDType(tokenmask.BoolMask(in.EntropyMask), perToken.DType()))
	}
	kl := ZerosLike(logps)
	if p.Beta != 0 {
		kl = KLk3(logps, in.RefLogProbs, in.Mask)
		if p.BiasCorrectionKL { // k3_t·ρ_t (TRL 1.x: per_token_kl * coef_1)
			kl = Mul(kl, BroadcastToDims(coef, kl.Shape().Dimensions...))
		}
		perToken = Add(perToken, MulScalar(kl, p.Beta))
	}
	m := metrics(rho, in, p, kl)
	if phi != nil { // vespo/phi_seq_mean: the mean weight over sequences
		m.VESPOPhiMean = StopGradient(ReduceAllMean(ConvertDType(phi, dtypes.Float64)))
	}
	return agg(perToken, in.Mask), m
}

// advantagesColumn is the detached advantages as [B,1] (from [B]) or [B,T], in dtype.
func advantagesColumn(a *Node, dtype dtypes.DType) *Node {
	a = ConvertDType(StopGradient(a), dtype)
	if a.Rank() == 1 {
		a = InsertAxes(a, -1)
	}
	return a
}

// CISPOSurrogate is TRL 1.x's loss_type "cispo" (MiniMax-M1, arXiv:2506.13585; ScaleRL): the
// importance ratio, capped above at epsHigh and detached, weighs the REINFORCE term,
//
//	ℓ_t = −sg(min(ρ_t, ε_high))·A·log π_t
//
// so a token whose ratio passed the cap keeps its gradient, scaled (TRL: torch.clamp(coef_1,
// max=epsilon_high), ε_high itself being the cap). [B,T].
func CISPOSurrogate(rho, logps, advantages *Node, epsHigh float64) *Node {
	w := StopGradient(MinScalar(rho, epsHigh))
	out := Neg(Mul(Mul(w, advantagesColumn(advantages, logps.DType())), logps))
	return BroadcastToDims(out, logps.Shape().Dimensions...)
}

// SAPOSurrogate is TRL 1.x's loss_type "sapo" (Soft Adaptive Policy Optimization): a smooth gate
// in place of the clip, with its own temperature for positive and other advantages,
//
//	ℓ_t = −σ(τ·(ρ_t − 1))·4/τ·A,     τ = τ_pos if A > 0 else τ_neg
//
// whose gradient in ρ is 4σ(1−σ)·A: 1·A at ρ = 1, falling off smoothly away from it. [B,T] or
// [B,1].
func SAPOSurrogate(rho, advantages *Node, tauPos, tauNeg float64) *Node {
	a := advantagesColumn(advantages, rho.DType())
	tau := Where(GreaterThan(a, ZerosLike(a)), ConstAs(a, tauPos), ConstAs(a, tauNeg))
	soft := Div(MulScalar(Sigmoid(Mul(tau, AddScalar(rho, -1))), 4), tau)
	return Neg(Mul(soft, a))
}

// VESPOWeights are TRL 1.x's VESPO gamma weights, detached, [B,1]: with w the sequence's
// importance ratio exp(Σ_t m_t·clamp(log π_t − log π_old,t, ±20)) (a sum, not GSPO's mean; its
// log clamped to [log 1e-8, 20]) and k, λ by the advantage's sign (A ≥ 0: k_pos, λ_pos),
//
//	φ(w) = e^λ·w^k·e^(−λw),   log φ = λ + k·log w − λ·w,   φ(1) = 1
//
// (grpo_trainer.py get_gamma_weights; a non-finite φ is 0). The loss is then −φ·A·log π_t.
func VESPOWeights(logps, oldLogps, mask, advantages *Node, p VESPOParams) *Node {
	lowClamp := math.Log(1e-8)
	logRatio := ClipScalar(Sub(StopGradient(logps), StopGradient(oldLogps)), -20, 20)
	seq := InsertAxes(tokenmask.SeqSum(logRatio, mask), -1) // [B,1]
	logW := ClipScalar(seq, lowClamp, 20)
	a := advantagesColumn(advantages, logps.DType())
	if a.Shape().Dim(1) != 1 {
		a = Slice(a, AxisRange(), AxisElem(0)) // sequence weights: one advantage per row
	}
	nonNeg := GreaterOrEqual(a, ZerosLike(a))
	k := Where(nonNeg, ConstAs(a, p.KPos), ConstAs(a, p.KNeg))
	lambda := Where(nonNeg, ConstAs(a, max(p.LambdaPos, 1e-4)), ConstAs(a, max(p.LambdaNeg, 1e-4)))
	logPhi := Sub(Add(lambda, Mul(k, logW)), Mul(lambda, Exp(logW)))
	phi := Exp(logPhi)
	return StopGradient(Where(IsFinite(phi), phi, ZerosLike(phi)))
}

// metrics follows TRL: token-level ratios are averaged over completion tokens, sequence-level
// ones ([B,1]) over sequences.
func metrics(rho *Node, in Inputs, p Params, kl *Node) Metrics {
	rho = StopGradient(rho)
	a := ConvertDType(StopGradient(in.Advantages), rho.DType())
	if a.Rank() == 1 {
		a = InsertAxes(a, -1)
	}
	dims := slices.Clone(rho.Shape().Dimensions)
	dims[1] = max(dims[1], a.Shape().Dimensions[1])
	rho, a = BroadcastToDims(rho, dims...), BroadcastToDims(a, dims...)
	zero := ZerosLike(a)
	low := LogicalAnd(LessThan(rho, Scalar(rho.Graph(), rho.DType(), 1-p.EpsLow)), LessThan(a, zero))
	high := LogicalAnd(GreaterThan(rho, Scalar(rho.Graph(), rho.DType(), 1+p.EpsHigh)), GreaterThan(a, zero))
	mean := func(x *Node) *Node {
		f := ConvertDType(x, dtypes.Float64)
		if rho.Shape().Dimensions[1] == 1 && in.LogProbs.Shape().Dimensions[1] != 1 { // sequence level
			return ReduceAllMean(f)
		}
		return tokenmask.TokenMean(f, in.Mask)
	}
	cispo := LogicalAnd(GreaterThan(rho, Scalar(rho.Graph(), rho.DType(), p.EpsHigh)), GreaterThan(a, zero))
	return Metrics{
		CISPOClip:       mean(cispo),
		ClipRatioLow:    mean(low),
		ClipRatioHigh:   mean(high),
		ClipRatioRegion: mean(LogicalOr(low, high)),
		KL:              StopGradient(tokenmask.TokenMean(ConvertDType(kl, dtypes.Float64), in.Mask)),
	}
}
