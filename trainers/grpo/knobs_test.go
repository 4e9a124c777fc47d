package grpo

import "testing"

// The GRPOConfig knobs reach the loss: delta selects the two-sided surrogate.
func TestGRPO_DeltaReachesTheLoss(t *testing.T) {
	c := tinyConfig(t)
	c.Delta = 2
	if got := newTiny(t, c, countReward('c')).spec.Params.Delta; got != 2 {
		t.Errorf("spec delta = %v, want 2", got)
	}
}
