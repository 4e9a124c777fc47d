package bench

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/sft"
)

func xlaCPU(t *testing.T) backends.Backend {
	t.Helper()
	b, err := backend.New("xla:cpu")
	if err != nil {
		t.Skipf("needs the XLA CPU plugin (make xla-cpu): %v", err)
	}
	t.Cleanup(b.Finalize)
	return b
}

// The plan of a model that has only shapes is XLA's plan of the step that runs: an SFT step of the
// tiny preset in bfloat16, run for real (weights with values, Micro then Apply), has the memory
// plan Plan compiles for a trainable.ShapeModel of the same shape, executable by executable, with
// gradient checkpointing and without.
func TestPlan_IsThePlanOfTheStepThatRuns(t *testing.T) {
	b := xlaCPU(t)
	cfg, err := decoder.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	rows := randomIDs(rand.New(rand.NewPCG(3, 4)), cfg, 2, 24)
	ctx := context.New()
	if err := decoder.InitWeights(ctx, cfg, 5, dtypes.Float32); err != nil {
		t.Fatal(err)
	}
	real := &trainable.Model{Config: cfg, Ctx: ctx, DType: dtypes.Float32}
	if err := real.ToBF16(); err != nil {
		t.Fatal(err)
	}
	shaped, err := trainable.ShapeModel(cfg, dtypes.BFloat16, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for v := range shaped.Ctx.IterVariables() {
		if v.HasValue() {
			t.Fatalf("ShapeModel's %s has a value", v.ScopeAndName())
		}
	}
	step := func(m *trainable.Model, run, checkpointing bool) loop.StepPlan {
		tr, err := sft.FromTokens(m, rows, "nll")
		if err != nil {
			t.Fatal(err)
		}
		hp := benchAdamW
		hp.GradientCheckpointing = checkpointing
		opt, err := loop.NewOptimizer(b, m, hp, tr.Loss)
		if err != nil {
			t.Fatal(err)
		}
		defer opt.Close()
		in, err := tr.Batch([]int{0, 1})
		if err != nil {
			t.Fatal(err)
		}
		if !run {
			p, err := opt.Plan(in)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		if _, _, err := opt.Micro(in, 46); err != nil {
			t.Fatal(err)
		}
		if _, err := opt.Apply(1e-5); err != nil {
			t.Fatal(err)
		}
		p, err := opt.Ran()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, checkpointing := range []bool{false, true} {
		ran, planned := step(real, true, checkpointing), step(shaped, false, checkpointing)
		if ran.Accum != planned.Accum || ran.Update != planned.Update {
			t.Fatalf("checkpointing %v: planned %+v / %+v, the step that ran %+v / %+v", checkpointing, planned.Accum, planned.Update, ran.Accum, ran.Update)
		}
		if planned.Accum.Temporary == 0 || planned.Update.Aliases == 0 {
			t.Fatalf("checkpointing %v: an empty plan: %+v / %+v", checkpointing, planned.Accum, planned.Update)
		}
	}
}

// Every planned method compiles on the tiny preset (in bfloat16, SFT in float32 too), with the state a trainer holds: under
// bfloat16 a bfloat16 weight, its float32 master, gradient sum and two AdamW moments (18 bytes a
// trained parameter), 16 in float32; its forward pass's rows; and a total past the state.
func TestPlanStep_Methods(t *testing.T) {
	b := xlaCPU(t)
	for _, method := range append([]string{"sft-float32"}, PlanMethods...) {
		dt := dtypes.BFloat16
		if method == "sft-float32" {
			method, dt = "sft", dtypes.Float32
		}
		{
			res, err := PlanStep(b, MemoryParams{Preset: "tiny", Method: method, Batch: 2, SeqLen: 16, DType: dt})
			if err != nil {
				t.Fatalf("%s %s: %v", method, dt, err)
			}
			perParam := int64(16)
			if dt == dtypes.BFloat16 {
				perParam = 18
			}
			rows := 4
			if method == "sft" || method == "grpo" || method == "ppo" {
				rows = 2
			}
			// PPO trains a value model beside the policy (the policy's shape with a one-label head).
			trainsMore := res.TrainableParams > res.Params
			if res.StateBytes != perParam*int64(res.TrainableParams) || trainsMore != (method == "ppo") || res.Rows != rows {
				t.Fatalf("%s %s: state %d bytes for %d trained parameters (want %d a parameter; the model has %d), %d rows",
					method, dt, res.StateBytes, res.TrainableParams, perParam, res.Params, res.Rows)
			}
			if res.TotalBytes <= res.StateBytes || res.Accum.TempBytes == 0 {
				t.Fatalf("%s %s: total %d, state %d, accum %+v", method, dt, res.TotalBytes, res.StateBytes, res.Accum)
			}
		}
	}
	short, err := PlanStep(b, MemoryParams{Preset: "tiny", Method: "sft", Batch: 2, SeqLen: 16, DType: dtypes.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	long, err := PlanStep(b, MemoryParams{Preset: "tiny", Method: "sft", Batch: 2, SeqLen: 256, DType: dtypes.BFloat16})
	if err != nil {
		t.Fatal(err)
	}
	if long.Accum.TempBytes <= short.Accum.TempBytes || long.StateBytes != short.StateBytes {
		t.Fatalf("16 tokens: temp %d, state %d; 256 tokens: temp %d, state %d", short.Accum.TempBytes, short.StateBytes, long.Accum.TempBytes, long.StateBytes)
	}
}
