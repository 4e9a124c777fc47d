package grpo

import (
	"bytes"
	stdctx "context"
	"errors"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// GRPO with β > 0 and a LoRA adapter, on the tiny Qwen2 and the Qwen3, Llama and SmolLM2-form
// fixtures: the reference log-probs are read from the policy's own context (the adapter
// disabled), which holds one copy of the base weights and no other model variables; the KL to
// the reference is 0 at step 1 (the adapter starts at the base) and grows once the adapter has
// moved; the base weights never change.
func TestGRPO_PEFTReferenceIsBase(t *testing.T) {
	models := map[string]func() *trainable.Model{"qwen2": func() *trainable.Model {
		m := tinyModel(t, 3)
		if err := m.AttachAdapter(lora.Config{R: 4, Alpha: 16, TargetModules: []string{lora.AllLinear}}, 1); err != nil {
			t.Fatal(err)
		}
		return m
	}}
	for _, f := range looptest.Fixtures {
		models[f] = func() *trainable.Model {
			m, err := trainable.LoadModelPEFT(looptest.Fixture(t, f), false, lora.Config{R: 4, Alpha: 16, TargetModules: []string{lora.AllLinear}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
	for _, name := range slices.Sorted(maps.Keys(models)) {
		t.Run(name, func(t *testing.T) {
			m := models[name]()
			c := tinyConfig(t)
			c.Beta, c.MaxSteps, c.MaxCompletionLength, c.LossType = 0.04, 3, 4, "grpo"
			var infos []StepInfo
			tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: m,
				Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{firstLetter()},
				OnStep: func(s StepInfo) { infos = append(infos, s) }})
			if err != nil {
				t.Fatal(err)
			}
			if tr.refCtx != m.Ctx || tr.ref != nil {
				t.Fatalf("the reference reads another context (%p, policy %p) or keeps its own model", tr.refCtx, m.Ctx)
			}
			base, _, err := m.Params()
			if err != nil {
				t.Fatal(err)
			}
			before := modelWeights(t, tr)
			n := 0
			for v := range m.Ctx.IterVariables() {
				if hasPrefix(v.Scope(), "/model") || hasPrefix(v.Scope(), "/lm_head") {
					n++
				}
			}
			if n != len(base) {
				t.Fatalf("%d variables under /model and /lm_head, want the %d base tensors once", n, len(base))
			}
			if _, err := tr.Train(stdctx.Background()); err != nil {
				t.Fatal(err)
			}
			// kl is 0 at step 1 (B = 0: the policy is the base) to float32 round-off: the reference
			// (no adapter) and the policy (a zero adapter) are two graphs, which XLA fuses apart, and
			// exp(Δ) − Δ − 1 of a 1-ulp Δ rounds to about 2⁻²⁴ a token (measured −9.3e-10 for
			// smollm3-tiny on xla:cpu, 2026-12-02; exactly 0 on the pure-Go backend).
			if len(infos) != 3 || math.Abs(infos[0].Metrics["kl"]) > 0x1p-23 || !(infos[2].Metrics["kl"] > 0) {
				t.Fatalf("kl per step %v, %v, %v: want 0 (within 2⁻²³) at step 1, > 0 at step 3", infos[0].Metrics["kl"], infos[1].Metrics["kl"], infos[2].Metrics["kl"])
			}
			after := modelWeights(t, tr)
			for k, v := range before {
				if !slices.Equal(v, after[k]) {
					t.Fatalf("base weight %s changed", k)
				}
			}
		})
	}
}

// GRPO with an adapter (dropout on, β > 0) resumes exactly: 2 steps straight equal 1 step, an
// interruption and a resumed step (the adapter file and the metrics, bit for bit).
func TestGRPO_PEFTResume(t *testing.T) {
	dir := looptest.Fixture(t, "qwen3-tiny")
	run := func(c *Config, stopAt int) error {
		m, err := trainable.LoadModelPEFT(dir, false, lora.Config{R: 4, Alpha: 8, Dropout: 0.2, TargetModules: []string{lora.AllLinear}}, 1)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
		defer cancel(nil)
		tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: m,
			Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{firstLetter()},
			OnStep: func(s StepInfo) {
				if s.Step == stopAt {
					cancel(checkpoint.ErrInterrupted)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Train(ctx)
		return err
	}
	newConfig := func() *Config {
		c := tinyConfig(t)
		c.Model, c.LossType, c.MaxSteps, c.MaxCompletionLength, c.Beta = dir, "grpo", 2, 4, 0.04
		return c
	}
	straight := newConfig()
	if err := run(straight, 0); err != nil {
		t.Fatal(err)
	}
	c := newConfig()
	if err := run(c, 1); !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("interrupted run: %v, want loop.ErrInterrupted", err)
	}
	resumed := newConfig()
	resumed.OutputDir, resumed.Resume = c.OutputDir, true
	if err := run(resumed, 0); err != nil {
		t.Fatal(err)
	}
	want, err1 := os.ReadFile(filepath.Join(straight.OutputDir, lora.WeightsName))
	got, err2 := os.ReadFile(filepath.Join(c.OutputDir, lora.WeightsName))
	if err1 != nil || err2 != nil || !bytes.Equal(got, want) {
		t.Errorf("the resumed run's adapter differs from the straight run's (%v, %v)", err1, err2)
	}
	looptest.SameMetrics(t, filepath.Join(straight.OutputDir, runlog.MetricsName), filepath.Join(c.OutputDir, runlog.MetricsName))
}
