package rl

import (
	"fmt"
	"math"
)

// KL estimators of the per-token KL(π‖π_ref) from a sample's log-probs (Schulman, "Approximating
// KL Divergence", 2020), as TRL's PPOTrainer names them (kl_estimator):
//
//	k1 = −log r = log π − log π_ref            (unbiased)
//	k3 = (r − 1) − log r,  r = π_ref/π         (unbiased, lower variance, ≥ 0)
const (
	KLK1 = "k1"
	KLK3 = "k3"
)

// TokenKL is the per-token KL estimate of one sampled token with log-prob logp under the policy
// and refLogp under the reference, computed as TRL's PPOTrainer does: logr = refLogp − logp,
// then k1 = −logr or k3 = (exp(logr) − 1) − logr. The course's phase 9 (식 (9.3)) uses k1:
// its per-token reward is −β·TokenKL(old, ref, "k1").
func TokenKL(logp, refLogp float64, estimator string) float64 {
	logr := refLogp - logp
	if estimator == KLK3 {
		return (math.Exp(logr) - 1) - logr
	}
	return -logr
}

// CheckKLEstimator returns an error for an estimator that is neither k1 nor k3.
func CheckKLEstimator(estimator string) error {
	if estimator != KLK1 && estimator != KLK3 {
		return fmt.Errorf("kl_estimator must be k1 or k3, got %q", estimator)
	}
	return nil
}

// MaskedMean is Σ x·m / Σ m over every entry of a [N][T] table (TRL's masked_mean with no axis).
func MaskedMean(x [][]float64, mask [][]bool) float64 {
	s, n := 0.0, 0.0
	for i, row := range x {
		for t, v := range row {
			if mask[i][t] {
				s += v
				n++
			}
		}
	}
	return s / n
}

// MaskedVar is TRL's masked_var with unbiased = True: the masked mean of (x − mean)², times the
// Bessel correction n/(n − 1) (n the masked count). n = 0 is an error, as in TRL.
func MaskedVar(x [][]float64, mask [][]bool) (float64, error) {
	mean := MaskedMean(x, mask)
	s, n := 0.0, 0.0
	for i, row := range x {
		for t, v := range row {
			if mask[i][t] {
				d := v - mean
				s += d * d
				n++
			}
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("whitening: no unmasked value (the mini-batch is too small)")
	}
	return s / n * (n / (n - 1)), nil
}

// MaskedWhiten is TRL's masked_whiten: (x − mean)·rsqrt(var + 1e-8) over the masked entries'
// mean and unbiased variance, with the mean added back when shiftMean is false. Every entry is
// transformed (masked-out ones too); the caller zeroes those it does not want, as TRL does.
func MaskedWhiten(x [][]float64, mask [][]bool, shiftMean bool) ([][]float64, error) {
	mean := MaskedMean(x, mask)
	v, err := MaskedVar(x, mask)
	if err != nil {
		return nil, err
	}
	scale := 1 / math.Sqrt(v+1e-8)
	out := make([][]float64, len(x))
	for i, row := range x {
		out[i] = make([]float64, len(row))
		for t, val := range row {
			w := (val - mean) * scale
			if !shiftMean {
				w += mean
			}
			out[i][t] = w
		}
	}
	return out, nil
}
