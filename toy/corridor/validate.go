package corridor

import (
	"fmt"
	"math"
)

// The messages name the CLI flag (kebab-case) so a user sees which setting to fix.

func checkGamma(g float64) error { return checkRange("gamma", g, 0, 1) }

func checkProb(name string, p float64) error { return checkRange(name, p, 0, 1) }

func checkRange(name string, x, lo, hi float64) error {
	if math.IsNaN(x) || x < lo || x > hi {
		return fmt.Errorf("%s must be in [%v, %v], got %v", name, lo, hi, x)
	}
	return nil
}

func checkNonNegative(name string, x float64) error {
	if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
		return fmt.Errorf("%s must be a finite number >= 0, got %v", name, x)
	}
	return nil
}

func checkAtLeast(name string, n, min int) error {
	if n < min {
		return fmt.Errorf("%s must be >= %d, got %d", name, min, n)
	}
	return nil
}

// firstError returns the first non-nil error.
func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
