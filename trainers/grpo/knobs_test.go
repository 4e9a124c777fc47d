package grpo

import (
	"math"
	"reflect"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
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
	c.TopK, c.TopP, c.MinP, c.Temperature, c.RepetitionPenalty = 5, 0.9, 0.1, 0.7, 1.2
	o := newTiny(t, c, countReward('c')).sampleOptions()
	if o.TopK != 5 || o.TopP != 0.9 || o.MinP != 0.1 || o.Temperature != 0.7 || o.RepetitionPenalty != 1.2 {
		t.Errorf("sample options = %+v, want top_k 5, top_p 0.9, min_p 0.1, temperature 0.7, repetition penalty 1.2", o)
	}
}

// min_p and repetition_penalty reach the sampler: from the same seed they draw other completions,
// and since the trainer scores under the whole tempered, unshaped distribution (as TRL), the
// sampler's log-probs (of that distribution too) still agree with the trainer's.
func TestGRPO_SamplerShapingRuns(t *testing.T) {
	run := func(set func(*Config)) StepInfo {
		c := tinyConfig(t)
		c.Temperature = 0.7
		set(c)
		return trainRun(t, c, countReward('c'), nil)[0]
	}
	off := run(func(*Config) {})
	for name, set := range map[string]func(*Config){
		"min_p 0.3":              func(c *Config) { c.MinP = 0.3 },
		"repetition_penalty 3.0": func(c *Config) { c.RepetitionPenalty = 3 },
	} {
		on := run(set)
		if d := on.Metrics["sampling/sampling_logp_difference/max"]; !(d < 1e-4) {
			t.Errorf("%s: max |sampling − training log-prob| = %g, want < 1e-4", name, d)
		}
		if reflect.DeepEqual(off.Scored.Completions, on.Scored.Completions) {
			t.Errorf("%s drew the same completions as the plain sampler with the same seed: not wired to it", name)
		}
	}
}

// top_entropy_quantile at the trainer: ρ = 1 builds the old graph; forcing the entropy mask at
// ρ = 1 (τ = the minimum entropy, every token kept) gives bit-identical weights after an
// off-policy run with a reference; ρ = 0.5 drops half of each micro-batch's tokens from the
// surrogate and changes the update.
func TestGRPO_TopEntropyQuantile(t *testing.T) {
	run := func(rho float64, force bool) (map[string][]float32, []StepInfo) {
		c := tinyConfig(t)
		c.MaxSteps, c.Beta, c.TopEntropyQuantile = 2, 0.05, rho
		c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps, c.StepsPerGeneration = 8, 2, 4 // off-policy
		tr := newTiny(t, c, countReward('c'))
		if tr.spec.EntropyMask != (rho < 1) {
			t.Fatalf("ρ = %v: spec.EntropyMask = %v", rho, tr.spec.EntropyMask)
		}
		tr.spec.EntropyMask = tr.spec.EntropyMask || force
		var infos []StepInfo
		tr.s.OnStep = func(s StepInfo) { infos = append(infos, s) }
		if _, err := tr.Train(t.Context()); err != nil {
			t.Fatal(err)
		}
		return modelWeights(t, tr), infos
	}
	plain, plainInfos := run(1, false)
	forced, _ := run(1, true)
	half, halfInfos := run(0.5, false)
	if !reflect.DeepEqual(plain, forced) {
		t.Error("ρ = 1 with the mask forced on changed the weights; want bit-identical (every token kept, ×1)")
	}
	if reflect.DeepEqual(plain, half) {
		t.Error("ρ = 0.5 left the weights unchanged")
	}
	// The first step's rollout is the same (same seed, same weights): only the update differs.
	if !reflect.DeepEqual(plainInfos[0].Scored.Completions, halfInfos[0].Scored.Completions) {
		t.Fatal("ρ changed the first rollout")
	}
	if plainInfos[0].GradNorm == halfInfos[0].GradNorm {
		t.Errorf("grad norm %g at step 1 with ρ = 0.5 and 1; want different", halfInfos[0].GradNorm)
	}
	// The entropy metric is over every completion token, mask or not (TRL's masked_batch_mean):
	// the same tokens and weights, so equal to float32 round-off. The two runs' step graphs differ
	// (the mask), which XLA fuses differently: 1 ulp apart there (2.6212114 and 2.6212112,
	// measured 2026-12-02 on xla:cpu), equal on the pure-Go backend; 4 ulps allowed.
	if a, b := plainInfos[0].Metrics["entropy"], halfInfos[0].Metrics["entropy"]; math.Abs(a-b) > 4*ulp32(a) {
		t.Errorf("entropy metric %.9g (ρ = 1) vs %.9g (ρ = 0.5) at step 1; want equal within 4 float32 ulps", a, b)
	}
}

// ulp32 is the spacing of float32 values at |x|.
func ulp32(x float64) float64 {
	f := float32(math.Abs(x))
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}

// modelWeights copies the policy's /model variables.
func modelWeights(t *testing.T, tr *Trainer) map[string][]float32 {
	t.Helper()
	out := map[string][]float32{}
	for v := range tr.s.Model.Ctx.IterVariables() {
		if !hasPrefix(v.Scope(), "/model") {
			continue
		}
		val, err := v.Value()
		if err != nil {
			t.Fatal(err)
		}
		out[v.Scope()+"/"+v.Name()] = tensors.MustCopyFlatData[float32](val)
	}
	if len(out) == 0 {
		t.Fatal("no /model variables")
	}
	return out
}
