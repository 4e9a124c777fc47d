package rl

// PPOClipTerm is the per-sample PPO clipped objective, 식 (7.2):
//
//	objective = min(ρ·A, clip(ρ, 1−ε, 1+ε)·A)
//
// and its derivative with respect to log π(a|s). Since ∂ρ/∂θ = ρ·∇log π, the coefficient is ρ·A
// when the unclipped term is selected, and 0 when the clipped (constant) term is selected: a good
// action already pushed up past 1+ε, or a bad one already pushed down past 1−ε, stops moving.
// ratio is ρ = π(a|s)/π_old(a|s) (식 (7.1)).
func PPOClipTerm(ratio, adv, eps float64) (objective, coef float64) {
	unclipped := ratio * adv
	clipped := pyMax(1-eps, pyMin(1+eps, ratio)) * adv
	if clipped < unclipped { // the smaller (pessimistic) term is the clipped one
		return clipped, 0.0
	}
	return unclipped, ratio * adv
}

// pyMin is Python's min(a, b): a unless b < a.
func pyMin(a, b float64) float64 {
	if b < a {
		return b
	}
	return a
}

// pyMax is Python's max(a, b): a unless b > a.
func pyMax(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}
