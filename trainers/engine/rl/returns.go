// Package rl holds the reinforcement-learning math shared by the course's toys (toy/corridor,
// toy/tinylm, toy/gymrl) and the LLM trainers: host-side float64 discounted returns, GAE, the PPO
// clip term and group advantages, every function adding left to right as the course's Python
// does, so results agree with the course's goldens bit for bit; and the clipped surrogate as a
// graph (ClippedSurrogate, surrogate.go), GRPO's and PPO's policy loss.
package rl

import (
	"math/big"
	"sync"
)

// DiscountedReturn is 식 (1.1): G_0 = R_1 + γR_2 + γ²R_3 + … = Σ_k γ^k·R_{k+1}.
//
// rewards[k] is R_{k+1}, the reward received right after the k-th action. γ^k is correctly
// rounded (as C's pow), not math.Pow, so sums match CPython's `sum(gamma ** k * r ...)`.
func DiscountedReturn(rewards []float64, gamma float64) float64 {
	g := 0.0
	for k, r := range rewards {
		g += PowInt(gamma, k) * r
	}
	return g
}

// ReturnsBackward is 식 (1.2): G_t = R_{t+1} + γ·G_{t+1}, with G_T = 0 after the end.
//
// One backward pass gives every G_t; the result is [G_0, G_1, …, G_{T-1}].
func ReturnsBackward(rewards []float64, gamma float64) []float64 {
	out := make([]float64, len(rewards))
	g := 0.0
	for t := len(rewards) - 1; t >= 0; t-- {
		g = rewards[t] + gamma*g
		out[t] = g
	}
	return out
}

// GAE is generalized advantage estimation, 식 (6.1)-(6.2):
//
//	δ_t = r_{t+1} + γ·V(s_{t+1}) − V(s_t)        (6.1)
//	A_t = δ_t + γλ·A_{t+1}                        (6.2, backwards, like 식 (1.2))
//	returns_t = A_t + V(s_t)                      (the critic's target)
//
// values[t] = V(s_t). After the last step the next state's value is 0 if the episode terminated,
// and lastValue = V(s_T) if it was truncated (bootstrapping). λ=1 gives G_t − V(s_t) (Monte
// Carlo), λ=0 gives δ_t (TD).
func GAE(rewards, values []float64, lastValue float64, terminated bool, gamma, lam float64) (deltas, adv, returns []float64) {
	n := len(rewards)
	if len(values) != n {
		panic("rl.GAE: len(values) != len(rewards)")
	}
	deltas = make([]float64, n)
	for t := range n {
		next := lastValue
		if t+1 < n {
			next = values[t+1]
		} else if terminated {
			next = 0.0
		}
		deltas[t] = rewards[t] + gamma*next - values[t]
	}
	adv = make([]float64, n)
	a := 0.0
	for t := n - 1; t >= 0; t-- {
		a = deltas[t] + gamma*lam*a
		adv[t] = a
	}
	returns = make([]float64, n)
	for t := range n {
		returns[t] = adv[t] + values[t]
	}
	return deltas, adv, returns
}

type powKey struct {
	x float64
	k int
}

var powCache sync.Map // powKey -> float64

// PowInt is x^k for k >= 0, correctly rounded (the exact product rounded once to float64), which
// is what C's pow (and so Python's x ** k) returns; Go's math.Pow can be a few ulps off.
func PowInt(x float64, k int) float64 {
	if k < 0 {
		panic("rl.PowInt: negative exponent")
	}
	if k == 0 {
		return 1
	}
	key := powKey{x, k}
	if v, ok := powCache.Load(key); ok {
		return v.(float64)
	}
	prec := uint(53*k + 64) // exact: a product of k 53-bit mantissas needs at most 53k bits
	acc := new(big.Float).SetPrec(prec).SetFloat64(1)
	bx := new(big.Float).SetPrec(prec).SetFloat64(x)
	for range k {
		acc.Mul(acc, bx)
	}
	v, _ := acc.Float64()
	powCache.Store(key, v)
	return v
}
