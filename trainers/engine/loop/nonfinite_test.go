package loop_test

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// poisoned is a method whose loss is NaN (nanLoss) or whose loss is finite but whose gradient is
// NaN (the loss plus 0·√(|l|−|l|): 0 forward, 0·∞ = NaN backward).
type poisoned struct {
	loop.Method
	nanGrad bool
}

func (p poisoned) Loss(ctx *mlctx.Context, in named.Inputs, norm *graph.Node) (*graph.Node, map[string]*graph.Node) {
	loss, ms := p.Method.Loss(ctx, in, norm)
	if p.nanGrad {
		zero := graph.Sqrt(graph.Sub(graph.Abs(loss), graph.Abs(loss)))
		return graph.Add(loss, graph.MulScalar(zero, 0)), ms
	}
	return graph.Add(loss, graph.Scalar(loss.Graph(), loss.DType(), math.NaN())), ms
}

// A non-finite loss or gradient norm stops training at that step with an error naming the step
// and the metric, for SFT, DPO and KTO alike (the check is the driver's, so GRPO's too): a run of
// 2 steps saved at each step, resumed to 4 steps with a method that turns NaN, fails at step 3;
// checkpoint-1 and checkpoint-2 are all there is, checkpoint-2 still loads and resumes, and the
// final model in the output directory is the one of the good run, byte for byte.
func TestRun_NonFiniteStops(t *testing.T) {
	dir := looptest.Model(t)
	for _, c := range resumeCases {
		for _, nanGrad := range []bool{false, true} {
			metric := map[bool]string{false: "loss", true: "grad_norm"}[nanGrad]
			t.Run(c.name+"/"+metric, func(t *testing.T) {
				train := looptest.MultFile(t, c.kind, c.rows, 3)
				cfg := c.cfg()
				tc := cfg.Common()
				looptest.Common(t, tc, 1e-3, 4, 1, 2)
				tc.SaveSteps = 1
				tc.Model, tc.Dataset = dir, train
				cfg.Resolve()
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				b := looptest.Backend(t)
				m := looptest.Load(t, dir, false)
				if _, err := loop.Run(context.Background(), m, c.build(t, b, m, looptest.Read(t, train), cfg), loop.Options{Config: cfg, Backend: b}); err != nil {
					t.Fatal(err)
				}
				good := readFile(t, filepath.Join(tc.OutputDir, "model.safetensors"))

				tc.MaxSteps, tc.Resume, tc.ResumeOverride = 4, true, []string{"max_steps"} // extended on purpose
				m = looptest.Load(t, dir, false)
				method := poisoned{Method: c.build(t, b, m, looptest.Read(t, train), cfg), nanGrad: nanGrad}
				res, err := loop.Run(context.Background(), m, method, loop.Options{Config: cfg, Backend: b})
				want := "step 3: " + metric + " is NaN"
				if err == nil || res != nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "checkpoint-2") || strings.Contains(err.Error(), "\n") {
					t.Fatalf("poisoned run: result %+v, error %v; want one line with %q naming checkpoint-2", res, err, want)
				}
				cps, err := checkpoint.List(tc.OutputDir)
				if err != nil {
					t.Fatal(err)
				}
				if len(cps) != 2 || cps[1].Step != 2 {
					t.Fatalf("checkpoints %v, want checkpoint-1 and checkpoint-2", cps)
				}
				if !bytes.Equal(good, readFile(t, filepath.Join(tc.OutputDir, "model.safetensors"))) {
					t.Error("the final model was rewritten by the failed run")
				}
				entries, err := os.ReadDir(tc.OutputDir)
				if err != nil {
					t.Fatal(err)
				}
				for _, e := range entries {
					if strings.HasPrefix(e.Name(), ".model-") {
						t.Errorf("temporary %s left behind", e.Name())
					}
				}
				// The last good checkpoint resumes: 2 more clean steps.
				m = looptest.Load(t, dir, false)
				if res, err := loop.Run(context.Background(), m, c.build(t, b, m, looptest.Read(t, train), cfg), loop.Options{Config: cfg, Backend: b}); err != nil || res.Steps != 4 {
					t.Fatalf("resume from checkpoint-2 after the failure: %+v, %v", res, err)
				}
			})
		}
	}
}

// A NaN eval_loss (the eval set's logits are not finite) stops the run at that evaluation with
// one line naming the step and the last checkpoint (step 2 is not saved: HF evaluates before it
// saves); it was logged as a metric and training went
// on. Saved at step 1, evaluated at step 2 with an eval method whose loss is NaN.
func TestRun_NonFiniteEvalStops(t *testing.T) {
	dir := looptest.Model(t)
	train := looptest.MultFile(t, mult.SFT, 8, 3)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 4, 1, 3)
	cfg.OutputDir = filepath.Join(t.TempDir(), "out")
	cfg.SaveSteps, cfg.EvalStrategy, cfg.EvalSteps, cfg.EvalDataset = 1, "steps", 2, train
	cfg.Model, cfg.Dataset = dir, train
	m := looptest.Load(t, dir, false)
	tr, err := sft.New(m, looptest.Read(t, train), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sft.New(m, looptest.Read(t, train), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = loop.Run(context.Background(), m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t), Eval: poisoned{Method: ev}})
	want := "step 2: evaluation: eval_loss is NaN: the model's logits on the eval set are not finite; training stopped (the last checkpoint is " +
		filepath.Join(cfg.OutputDir, "checkpoint-1") + ")"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("got %v, want one line containing %q", err, want)
	}
}
