package grpo

import (
	"reflect"
	"testing"
)

// The GRPOConfig knobs reach the loss: delta selects the two-sided surrogate.
func TestGRPO_DeltaReachesTheLoss(t *testing.T) {
	c := tinyConfig(t)
	c.Delta = 2
	if got := newTiny(t, c, countReward('c')).spec.Params.Delta; got != 2 {
		t.Errorf("spec delta = %v, want 2", got)
	}
}

// min_p reaches the sampler with the other GRPOConfig sampling knobs.
func TestGRPO_SampleOptionsCarryMinP(t *testing.T) {
	c := tinyConfig(t)
	c.TopK, c.TopP, c.MinP, c.Temperature = 5, 0.9, 0.1, 0.7
	o := newTiny(t, c, countReward('c')).sampleOptions()
	if o.TopK != 5 || o.TopP != 0.9 || o.MinP != 0.1 || o.Temperature != 0.7 {
		t.Errorf("sample options = %+v, want top_k 5, top_p 0.9, min_p 0.1, temperature 0.7", o)
	}
}

// A min_p run trains: the sampler truncates, the trainer scores under the whole tempered
// distribution, so the sampler's log-probs (full distribution too) still agree with the trainer's.
func TestGRPO_MinPRunSamplingLogpsAgree(t *testing.T) {
	run := func(minP float64) StepInfo {
		c := tinyConfig(t)
		c.MinP, c.Temperature = minP, 0.7
		return trainRun(t, c, countReward('c'), nil)[0]
	}
	off, on := run(0), run(0.3)
	if d := on.Metrics["sampling/sampling_logp_difference/max"]; !(d < 1e-4) {
		t.Errorf("max |sampling − training log-prob| = %g with min_p, want < 1e-4", d)
	}
	if reflect.DeepEqual(off.Rollout.Completions, on.Rollout.Completions) {
		t.Error("min_p 0.3 drew the same completions as min_p 0 with the same seed: not wired to the sampler")
	}
}
