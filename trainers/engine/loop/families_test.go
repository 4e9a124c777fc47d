package loop_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// SFT trains the tiny Qwen3, Llama, SmolLM2-form, SmolLM3 and Gemma 3 checkpoints: 3 steps straight give
// bit-identical weights and metrics lines to 2 steps, an interruption and a resumed step, and the
// saved model keeps the family's config (model_type, head_dim, biases, RoPE scaling, tying, Gemma's
// fields and layer types) and
// loads back. (The resume itself is the driver's and family-blind: TestRun_ResumeEqualsStraight
// covers DPO and KTO; TestRun_FamiliesDPOKTO runs them on the new families.)
func TestRun_FamiliesResumeEqualsStraight(t *testing.T) {
	for _, fixture := range looptest.Fixtures {
		dir := looptest.Fixture(t, fixture)
		base, err := decoder.ReadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resumeCases[:1] {
			t.Run(fixture+"/"+c.name, func(t *testing.T) {
				train := looptest.MultFile(t, c.kind, 6, 3)
				newConfig := func() config.Config {
					cfg := c.cfg()
					tc := cfg.Common()
					looptest.Common(t, tc, 1e-3, 2, 1, 3)
					tc.Model, tc.Dataset = dir, train
					cfg.Resolve()
					if err := cfg.Validate(); err != nil {
						t.Fatal(err)
					}
					return cfg
				}
				run := func(ctx context.Context, cfg config.Config, opts loop.Options) (*loop.Result, error) {
					m := looptest.Load(t, dir, false)
					b := looptest.Backend(t)
					opts.Config, opts.Backend = cfg, b
					return loop.Run(ctx, m, c.build(t, b, m, looptest.Read(t, train), cfg), opts)
				}
				cfg := newConfig()
				straight := cfg.Common().OutputDir
				if _, err := run(context.Background(), cfg, loop.Options{}); err != nil {
					t.Fatal(err)
				}
				cfg = newConfig()
				ctx, cancel := context.WithCancelCause(context.Background())
				res, err := run(ctx, cfg, loop.Options{AfterStep: func(step int) {
					if step == 2 {
						cancel(checkpoint.ErrInterrupted)
					}
				}})
				if !errors.Is(err, loop.ErrInterrupted) || res == nil || res.Steps != 2 {
					t.Fatalf("interrupted run: result %+v, error %v; want interrupted after step 2", res, err)
				}
				resumed := cfg.Common().OutputDir
				cfg.Common().Resume = true
				if res, err = run(context.Background(), cfg, loop.Options{}); err != nil || res.Steps != 3 {
					t.Fatalf("resumed run: %+v, %v", res, err)
				}
				if !bytes.Equal(readFile(t, filepath.Join(straight, "model.safetensors")), readFile(t, filepath.Join(resumed, "model.safetensors"))) {
					t.Errorf("model.safetensors differs between the straight and the resumed run")
				}
				looptest.SameMetrics(t, filepath.Join(straight, runlog.MetricsName), filepath.Join(resumed, runlog.MetricsName))
				checkFamilyKept(t, base, resumed, dir)
			})
		}
	}
}

// DPO and KTO run 2 steps on the tiny Qwen3 and Llama checkpoints: step 1's loss is ln 2 / KTO's
// 0.5 (the policy is its reference), the loss and gradient norm are finite, and the saved model
// keeps its family.
func TestRun_FamiliesDPOKTO(t *testing.T) {
	for _, fixture := range looptest.Fixtures[:2] {
		dir := looptest.Fixture(t, fixture)
		base, err := decoder.ReadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resumeCases[1:] {
			t.Run(fixture+"/"+c.name, func(t *testing.T) {
				train := looptest.MultFile(t, c.kind, 4, 3)
				cfg := c.cfg()
				tc := cfg.Common()
				looptest.Common(t, tc, 1e-3, 2, 1, 2)
				tc.Model, tc.Dataset = dir, train
				cfg.Resolve()
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				m := looptest.Load(t, dir, false)
				b := looptest.Backend(t)
				recs := looptest.Train(t, m, c.build(t, b, m, looptest.Read(t, train), cfg), loop.Options{Config: cfg, Backend: b})
				want := map[string]float64{"dpo": math.Ln2, "kto": 0.5}[c.name]
				if len(recs) != 2 || math.Abs(recs[0].Metrics["loss"]-want) > 1e-6 {
					t.Fatalf("metrics %+v; want 2 lines, step 1's loss %g", recs, want)
				}
				for _, r := range recs {
					if l, g := r.Metrics["loss"], r.Metrics["grad_norm"]; math.IsNaN(l) || math.IsInf(l, 0) || !(g > 0) || math.IsInf(g, 0) {
						t.Errorf("step %d: loss %g, grad_norm %g", r.Step, l, g)
					}
				}
				checkFamilyKept(t, base, tc.OutputDir, dir)
			})
		}
	}
}

// checkFamilyKept loads the trained model in out and checks that its config is base's family
// with base's options and its weights differ from those of the checkpoint in dir.
func checkFamilyKept(t *testing.T, base *decoder.Config, out, dir string) {
	t.Helper()
	m := looptest.Load(t, out, false)
	got := m.Config
	if got.ModelType != base.ModelType || got.HeadDim != base.HeadDim || got.Rope != base.Rope || got.AttentionBias != base.AttentionBias ||
		got.MLPBias != base.MLPBias || got.TieWordEmbeddings != base.TieWordEmbeddings || len(got.Tensors()) != len(base.Tensors()) ||
		!reflect.DeepEqual(got.Gemma, base.Gemma) || !slices.Equal(got.LayerTypes, base.LayerTypes) {
		t.Errorf("saved config %+v, want the family options of %+v", got, base)
	}
	if bytes.Equal(readFile(t, filepath.Join(out, "model.safetensors")), readFile(t, filepath.Join(dir, "model.safetensors"))) {
		t.Errorf("the saved weights are the initial ones")
	}
}
