package dpo

import (
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
)

// TRL's f_divergence_type names (trl FDivergenceType).
const (
	ReverseKL       = "reverse_kl"
	ForwardKL       = "forward_kl"
	JSDivergence    = "js_divergence"
	AlphaDivergence = "alpha_divergence"
)

// Logits is TRL dpo_loss's `logits` z [B], what sigmoid, robust, exo_pair, hinge and ipo read in
// place of the margin, for o's f_divergence_type (Wang et al. 2023, "Beyond Reverse KL:
// Generalizing Direct Preference Optimization with Diverse Divergence Constraints",
// arXiv:2309.16240) and reference_free:
//
//	reverse_kl, forward_kl  z = Margin(…)                  (TRL v0.24 has no forward_kl branch)
//	js_divergence           z = JSDivergenceLogits(…)
//	alpha_divergence        z = AlphaDivergenceLogits(…, f_alpha_divergence_coef)
//
// With reference_free the reference log-probs are 0 here (TRL: `(not self.reference_free) *
// ref_chosen_logps`, and `ref_logratios = torch.tensor([0])`), not in the metrics.
func Logits(p Pairs, o Params) *Node {
	refC, refR := lossRefs(p, o)
	switch o.FDivergence {
	case JSDivergence:
		return JSDivergenceLogits(p.PolicyChosen, p.PolicyRejected, refC, refR)
	case AlphaDivergence:
		return AlphaDivergenceLogits(p.PolicyChosen, p.PolicyRejected, refC, refR, o.FAlphaCoef)
	}
	return Margin(p.PolicyChosen, p.PolicyRejected, refC, refR)
}

// lossRefs are the reference log-probs dpo_loss's logits and log-ratios see: 0 with reference_free.
func lossRefs(p Pairs, o Params) (refChosen, refRejected *Node) {
	if o.ReferenceFree {
		return ZerosLike(p.RefChosen), ZerosLike(p.RefRejected)
	}
	return p.RefChosen, p.RefRejected
}

// JSDivergenceLogits is the Jensen-Shannon f-DPO logits (arXiv:2309.16240, f(u) = u·log u −
// (u+1)·log((u+1)/2); TRL f_divergence_type "js_divergence"): with u = π/π_ref,
//
//	z = m − [softplus(c) − softplus(r)],   c, r = the chosen, rejected log-ratios, m = c − r
//
// i.e. log(2u_w/(1+u_w)) − log(2u_l/(1+u_l)); all [B]. The gradient flows through both terms.
func JSDivergenceLogits(policyChosen, policyRejected, refChosen, refRejected *Node) *Node {
	c, r := logRatios(policyChosen, policyRejected, refChosen, refRejected)
	return Sub(Margin(policyChosen, policyRejected, refChosen, refRejected), Sub(Softplus(c), Softplus(r)))
}

// ExpCap is TRL's cap_exp bound for float32: floor(log(float32 max)·10⁴)/10⁴ (trl.trainer.utils
// get_exp_cap, decimal 4), so exp never overflows.
const ExpCap = 88.7228

// capExp is TRL's cap_exp: exp(min(x, ExpCap)).
func capExp(x *Node) *Node { return Exp(MinScalar(x, ExpCap)) }

// AlphaDivergenceLogits is the α-divergence f-DPO logits (arXiv:2309.16240, f(u) = (1 − u^−α)/α;
// TRL f_divergence_type "alpha_divergence", α = f_alpha_divergence_coef):
//
//	z = [exp(−α·r) − exp(−α·c)] / α,   c, r = the chosen, rejected log-ratios
//
// with TRL's cap_exp (exponents capped at ExpCap); all [B].
func AlphaDivergenceLogits(policyChosen, policyRejected, refChosen, refRejected *Node, alpha float64) *Node {
	c, r := logRatios(policyChosen, policyRejected, refChosen, refRejected)
	return DivScalar(Sub(capExp(MulScalar(r, -alpha)), capExp(MulScalar(c, -alpha))), alpha)
}
