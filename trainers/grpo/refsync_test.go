package grpo

import (
	stdctx "context"
	"math"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// fma32 rounds a·b + c once: checked against the exact sum (math/big) rounded to float32, on
// random operands and on cancelling ones, where a float64 sum rounded again to float32 can be off.
func TestFMA32_RoundsOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	exact := func(a, b, c float32) float32 {
		x := new(big.Float).SetPrec(200).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(200).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(200).SetFloat64(float64(c)))
		f, _ := x.Float32()
		return f
	}
	doubleRounded := 0
	for i := range 200000 {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		c := float32(rng.NormFloat64())
		if i%2 == 1 { // c ≈ −a·b plus a tail below float32's last bit: the hard cases
			c = -float32(float64(a) * float64(b))
			c = math.Float32frombits(math.Float32bits(c) + uint32(rng.IntN(3)) - 1)
		}
		got, want := fma32(a, b, c), exact(a, b, c)
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("fma32(%g, %g, %g) = %g, want %g", a, b, c, got, want)
		}
		if float32(float64(a)*float64(b)+float64(c)) != want {
			doubleRounded++
		}
	}
	// Hand-made double-rounding case: a·b = −2⁻²⁴·(1 − 2⁻³⁶) and c = 1 + 2⁻²³ sum to
	// 1 + 2⁻²⁴ + 2⁻⁶⁰, just above the float32 midpoint between 1 and 1 + 2⁻²³; its float64
	// rounding is the midpoint itself, which float32 then rounds to even (1). Exact: 1 + 2⁻²³.
	a := float32(-math.Pow(2, -24) * (1 + math.Pow(2, -18)))
	b := float32(1 - math.Pow(2, -18))
	c := float32(1 + math.Pow(2, -23))
	if got, want := fma32(a, b, c), exact(a, b, c); got != want || want != c {
		t.Errorf("tie case: fma32 = %.10g, exact = %.10g, want 1 + 2⁻²³", got, want)
	}
	if naive := float32(float64(a)*float64(b) + float64(c)); naive != 1 {
		t.Errorf("tie case: the float64 sum rounded again gives %.10g; the case does not test double rounding", naive)
	}
	t.Logf("float64-then-float32 rounding was wrong in %d of 200000 cases; fma32 in none", doubleRounded)
}

// TRL's _sync_target_model on a hand example: ref ← α·policy + (1−α)·ref with α = 0.6.
func TestMixReference_HandCheck(t *testing.T) {
	ref := []float32{1, 0, 2, -1}
	MixReference(ref, []float32{0, 1, 2, 4}, 0.6)
	want := []float32{0.4, 0.6, 2, 2}
	for i := range want {
		if math.Abs(float64(ref[i]-want[i])) > 1e-7 {
			t.Errorf("ref[%d] = %g, want %g", i, ref[i], want[i])
		}
	}
	ref = []float32{3, -5}
	if MixReference(ref, []float32{7, 11}, 1); ref[0] != 7 || ref[1] != 11 { // α = 1: the policy
		t.Errorf("α = 1: %v, want the policy", ref)
	}
	if MixReference(ref, []float32{0, 0}, 0); ref[0] != 7 || ref[1] != 11 { // α = 0: unchanged
		t.Errorf("α = 0: %v, want unchanged", ref)
	}
}

// hostWeights reads a model's float32 weights (the masters under bf16) by HF name.
func hostWeights(t *testing.T, m *trainable.Model) map[string][]float32 {
	t.Helper()
	vars, names, err := m.Params()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for i, v := range vars {
		if out[names[i]], err = float32s(m.Master(v)); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func syncConfig(t *testing.T, steps int) *Config {
	c := tinyConfig(t)
	c.Beta, c.SyncRefModel, c.RefModelMixupAlpha, c.RefModelSyncSteps = 0.04, true, 0.6, steps
	return c
}

// With sync_ref_model (τ = 2, α = 0.6) the reference is the starting weights until step 2, then
// after every step k·τ equals α·policy_{kτ} + (1−α)·ref, computed here in float64 from the
// policy weights of those steps, and is unchanged by the steps in between (bit for bit). Under
// bf16 the float32 masters are mixed and the reference's bfloat16 copies are their rounding.
func TestGRPO_SyncRefModel_MixesEveryTauSteps(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		c := syncConfig(t, 2)
		c.MaxSteps = 5
		m := tinyModel(t, 3)
		if bf16 {
			if err := m.ToBF16(); err != nil {
				t.Fatal(err)
			}
		}
		want64 := map[string][]float64{}
		for k, w := range hostWeights(t, m) {
			want64[k] = make([]float64, len(w))
			for i, x := range w {
				want64[k][i] = float64(x)
			}
		}
		init := hostWeights(t, m)
		var tr *Trainer
		var prev map[string][]float32
		moved := 0.0
		tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: m,
			Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{countReward('c')},
			OnStep: func(s StepInfo) {
				got, pol := hostWeights(t, tr.ref), hostWeights(t, m)
				if s.Step%2 == 0 {
					for k, w := range want64 {
						for i := range w {
							w[i] = 0.6*float64(pol[k][i]) + 0.4*w[i]
						}
					}
				} else if prev != nil && maxAbsDiff(got, prev) != 0 {
					t.Errorf("bf16 %v: step %d is not a sync step but the reference moved", bf16, s.Step)
				}
				for k, w := range want64 {
					for i, x := range w {
						if d := math.Abs(float64(got[k][i]) - x); d > 1e-6*(1+math.Abs(x)) {
							t.Fatalf("bf16 %v: step %d: %s[%d] = %.9g, want %.9g", bf16, s.Step, k, i, got[k][i], x)
						}
					}
				}
				moved, prev = max(moved, maxAbsDiff(got, init)), got
			}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Train(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
		if moved == 0 {
			t.Errorf("bf16 %v: the reference never moved", bf16)
		}
		if bf16 { // the scorer reads bfloat16 copies of the mixed float32 masters
			vars, _, _ := tr.ref.Params()
			for _, v := range vars {
				master, _ := float32s(tr.ref.Master(v))
				val, _ := v.Value()
				if val.DType() != dtypes.BFloat16 {
					t.Fatalf("reference %s is %s, want bfloat16", v.Name(), val.DType())
				}
				bf := tensors.MustCopyFlatData[bfloat16.BFloat16](val)
				for i, x := range master {
					if bf[i] != bfloat16.FromFloat32(x) {
						t.Fatalf("reference %s[%d] = %v, want bf16(%g)", v.Name(), i, bf[i], x)
					}
				}
			}
		}
	}
}

// runTrainer trains c on a fresh tiny model and returns the trainer and the final policy weights.
func runTrainer(t *testing.T, c *Config) (*Trainer, map[string][]float32) {
	t.Helper()
	m := tinyModel(t, 3)
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: m,
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{countReward('c')}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	return tr, hostWeights(t, m)
}

// A sync_ref_model run resumed from a checkpoint taken after a sync ends with the policy and the
// reference of a straight run, bit for bit: the mixed reference is saved (reference.safetensors)
// and restored. (TRL saves no reference, so its resumed run restarts from the initial one.)
func TestGRPO_SyncRefModel_ResumeEqualsStraight(t *testing.T) {
	straight := syncConfig(t, 2)
	straight.MaxSteps = 5
	trS, want := runTrainer(t, straight)

	c := syncConfig(t, 2)
	c.MaxSteps, c.SaveSteps = 3, 3
	runTrainer(t, c)
	ckpt := filepath.Join(c.OutputDir, "checkpoint-3")
	stored, _, err := safetensors.ReadFile(filepath.Join(ckpt, ReferenceName))
	if err != nil {
		t.Fatalf("the checkpoint after a sync has no reference: %v", err)
	}
	init := hostWeights(t, tinyModel(t, 3))
	d := 0.0
	for name, s := range stored {
		f, _ := s.Float32s()
		d = max(d, maxAbsDiff(map[string][]float32{name: f}, map[string][]float32{name: init[name]}))
	}
	if d == 0 {
		t.Error("the saved reference equals the starting weights: it was not synced")
	}

	resumed := syncConfig(t, 2)
	resumed.OutputDir, resumed.MaxSteps, resumed.ResumeFromCheckpoint, resumed.ResumeOverride = c.OutputDir, 5, ckpt, []string{"max_steps"}
	trR, got := runTrainer(t, resumed)
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("resumed policy differs from the straight run's by %g", d)
	}
	if d := maxAbsDiff(hostWeights(t, trR.ref), hostWeights(t, trS.ref)); d != 0 {
		t.Errorf("resumed reference differs from the straight run's by %g", d)
	}

	// Without the file a resume after a sync cannot continue as the straight run: an error.
	if err := os.Remove(filepath.Join(ckpt, ReferenceName)); err != nil {
		t.Fatal(err)
	}
	again := syncConfig(t, 2)
	again.OutputDir, again.MaxSteps, again.ResumeFromCheckpoint, again.ResumeOverride = t.TempDir(), 5, ckpt, []string{"max_steps"}
	tr, err := New(Setup{Config: resolved(t, again), Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{countReward('c')}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err == nil {
		t.Error("resume without reference.safetensors after a sync: no error")
	}
}

// sync_ref_model off is the frozen reference of before: a run with sync on but no sync step
// reached (τ > max_steps) ends with the same weights, bit for bit, and so does sync on with β = 0
// (no reference: TRL's callback does nothing), which writes no reference file.
func TestGRPO_SyncRefModel_OffIsUnchanged(t *testing.T) {
	off := tinyConfig(t)
	off.Beta, off.MaxSteps = 0.04, 3
	_, want := runTrainer(t, off)
	on := syncConfig(t, 100)
	on.MaxSteps, on.SaveSteps = 3, 3
	tr, got := runTrainer(t, on)
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("sync on, no sync step: weights differ from sync off by %g", d)
	}
	if tr.ref == nil {
		t.Error("sync on with β ≠ 0 has no synced reference")
	}
	if _, err := os.Stat(filepath.Join(on.OutputDir, "checkpoint-3", ReferenceName)); err == nil {
		t.Error("a reference file was saved before the first sync")
	}

	off0 := tinyConfig(t)
	off0.MaxSteps = 3
	_, want0 := runTrainer(t, off0)
	on0 := syncConfig(t, 1)
	on0.Beta, on0.MaxSteps, on0.SaveSteps = 0, 3, 3
	tr0, got0 := runTrainer(t, on0)
	if d := maxAbsDiff(got0, want0); d != 0 {
		t.Errorf("β = 0: sync on and off differ by %g", d)
	}
	if tr0.ref != nil || tr0.refEval != nil {
		t.Error("β = 0 with sync_ref_model built a reference")
	}
	if _, err := os.Stat(filepath.Join(on0.OutputDir, "checkpoint-3", ReferenceName)); err == nil {
		t.Error("β = 0: a reference file was saved")
	}
}
