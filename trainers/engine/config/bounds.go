package config

import (
	"fmt"
	"slices"
)

// MaxCount bounds every integer option but the seed, in absolute value, and every integer flag of
// the CLI: 2²⁴ = 16,777,216 tokens, rows, steps or ranks is past any length or count a run uses,
// and far enough from the int limits that sums and products of two of them (prompt + new tokens,
// rows × length) neither overflow nor size an allocation beyond a machine.
const MaxCount = 1 << 24

// unboundedOptions are the integer options that are neither lengths nor counts.
var unboundedOptions = []string{"seed"}

// CheckCount refuses an integer outside [-MaxCount, MaxCount]; the error reads after the name of
// the flag or option ("must be at most 16777216, got 2147483648").
func CheckCount(v int) error {
	switch {
	case v > MaxCount:
		return fmt.Errorf("must be at most %d, got %d", MaxCount, v)
	case v < -MaxCount:
		return fmt.Errorf("must be at least %d, got %d", -MaxCount, v)
	}
	return nil
}

// validateCounts bounds every integer option (but the seed) with CheckCount, before the options'
// own checks do arithmetic with them.
func validateCounts(c Config) error {
	for _, f := range fields(c) {
		v, ok := f.Value.Interface().(int)
		if !ok || slices.Contains(unboundedOptions, f.Key) {
			continue
		}
		if err := CheckCount(v); err != nil {
			return Bad(c, f.Key, err.Error())
		}
	}
	return nil
}

// TokensAtMost reports whether the product of the positive sizes is at most MaxCount, without
// overflowing.
func TokensAtMost(sizes ...int) bool {
	p := 1
	for _, s := range sizes {
		if s > MaxCount/p {
			return false
		}
		p *= s
	}
	return true
}
