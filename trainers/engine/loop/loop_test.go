package loop_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/kto"
	"github.com/posttrain/posttrain/trainers/sft"
)

// sftRun trains a fresh copy of the model at dir on data with cfg.
func sftRun(t *testing.T, ctx context.Context, dir, data string, cfg *sft.Config, opts loop.Options) (*loop.Result, error) {
	t.Helper()
	m := looptest.Load(t, dir, cfg.BF16)
	tr, err := sft.New(m, looptest.Read(t, data), cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts.Config, opts.Backend = cfg, looptest.Backend(t)
	return loop.Run(ctx, m, tr, opts)
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// resumeCase is one method of TestRun_ResumeEqualsStraight: its data and its trainer constructor
// (for the training and the eval set).
type resumeCase struct {
	name        string
	kind        mult.Kind
	rows, evals int // problems of the training and the eval set
	cfg         func() config.Config
	build       func(t *testing.T, b backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) loop.Method
}

var resumeCases = []resumeCase{
	{"sft", mult.SFT, 20, 5, func() config.Config { return sft.DefaultConfig() },
		func(t *testing.T, _ backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) loop.Method {
			tr, err := sft.New(m, d, cfg.(*sft.Config))
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}},
	{"dpo", mult.DPO, 20, 5, func() config.Config { return dpo.DefaultConfig() },
		func(t *testing.T, b backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) loop.Method {
			tr, err := dpo.New(b, m, d, cfg.(*dpo.Config))
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}},
	{"kto", mult.KTO, 10, 3, func() config.Config { return kto.DefaultConfig() },
		func(t *testing.T, b backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) loop.Method {
			tr, err := kto.New(b, m, d, cfg.(*kto.Config))
			if err != nil {
				t.Fatal(err)
			}
			return tr
		}},
}

// run trains a fresh copy of the model at dir on train (evaluating on eval) with cfg and opts.
func (c resumeCase) run(t *testing.T, ctx context.Context, dir, train, eval string, cfg config.Config, opts loop.Options) (*loop.Result, error) {
	t.Helper()
	m := looptest.Load(t, dir, false)
	b := looptest.Backend(t)
	tr := c.build(t, b, m, looptest.Read(t, train), cfg)
	opts.Config, opts.Backend, opts.Eval = cfg, b, c.build(t, b, m, looptest.Read(t, eval), cfg)
	return loop.Run(ctx, m, tr, opts)
}

// For SFT, DPO and KTO, 4 steps straight give bit-identical weights, optimizer state and metrics
// lines (eval lines too, apart from their timings) to 2 steps, an interruption (the Ctrl-C path:
// the context is cancelled, a checkpoint is saved) and a resumed run of 2 more steps. The run
// crosses an epoch boundary (20 rows, 8 per step) with a partial last step, logs every 3 steps
// (so the checkpoint falls inside a logging window) and evaluates every 2. Bit-exact because the
// resumed run replays the same float32 computations on the same inputs: weights and AdamW moments
// are saved as float32, AdamW's step count, the data cursor and the unlogged metric sums are in
// trainer_state.json, and the data order is a function of (seed, pass).
func TestRun_ResumeEqualsStraight(t *testing.T) {
	dir := looptest.Model(t)
	for _, c := range resumeCases {
		t.Run(c.name, func(t *testing.T) {
			train := looptest.MultFile(t, c.kind, c.rows, 3)
			eval := looptest.MultFile(t, c.kind, c.evals, 4)
			newConfig := func() config.Config {
				cfg := c.cfg()
				tc := cfg.Common()
				looptest.Common(t, tc, 1e-3, 4, 2, 4)
				tc.GradientCheckpointing = true // each method's default, resumed exactly
				tc.LoggingSteps, tc.LRSchedulerType, tc.WarmupSteps = 3, "linear", 1
				tc.EvalStrategy, tc.EvalSteps, tc.PerDeviceEvalBatchSize = "steps", 2, 3
				tc.Model, tc.Dataset, tc.EvalDataset = dir, train, eval
				cfg.Resolve()
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				return cfg
			}
			cfg := newConfig()
			straight := cfg.Common().OutputDir
			if _, err := c.run(t, context.Background(), dir, train, eval, cfg, loop.Options{}); err != nil {
				t.Fatal(err)
			}

			cfg = newConfig()
			ctx, cancel := context.WithCancelCause(context.Background())
			res, err := c.run(t, ctx, dir, train, eval, cfg, loop.Options{AfterStep: func(step int) {
				if step == 2 {
					cancel(checkpoint.ErrInterrupted)
				}
			}})
			if !errors.Is(err, loop.ErrInterrupted) || res == nil || !res.Interrupted || res.Steps != 2 {
				t.Fatalf("interrupted run: result %+v, error %v; want interrupted after step 2", res, err)
			}
			resumed := cfg.Common().OutputDir
			cfg.Common().Resume = true
			if res, err = c.run(t, context.Background(), dir, train, eval, cfg, loop.Options{}); err != nil || res.Steps != 4 {
				t.Fatalf("resumed run: %+v, %v", res, err)
			}
			for _, name := range []string{"model.safetensors", "checkpoint-4/optimizer.safetensors"} {
				if !bytes.Equal(readFile(t, filepath.Join(straight, name)), readFile(t, filepath.Join(resumed, name))) {
					t.Errorf("%s differs between the straight and the resumed run", name)
				}
			}
			looptest.SameMetrics(t, filepath.Join(straight, runlog.MetricsName), filepath.Join(resumed, runlog.MetricsName))
			st, err := checkpoint.Load(filepath.Join(resumed, "checkpoint-4"))
			if err != nil {
				t.Fatal(err)
			}
			// Logged at 3 and 4 (the last step), evaluated at 2 and 4.
			if st.Data != (checkpoint.DataPosition{Epoch: 1, Offset: 8}) || len(st.LogHistory) != 4 {
				t.Errorf("checkpoint-4: data position %+v, %d log lines; want {1 8} and 4", st.Data, len(st.LogHistory))
			}
		})
	}
}

// Gradient accumulation normalises by the tokens of the whole accumulated batch: 2 micro-batches
// of 2 rows give the loss, gradient norm and update of one batch of 4 rows, to float32 round-off
// (the sums are grouped differently). The rows have 3 to 5 completion tokens, so averaging per
// micro-batch (the bug the HF blog "Fixing Gradient Accumulation" describes) would differ.
func TestRun_AccumulationEqualsBigBatch(t *testing.T) {
	dir := looptest.Model(t)
	data := looptest.MultFile(t, mult.SFT, 8, 4)
	run := func(batch, accum int) (runlog.Record, map[string]*safetensors.Tensor) {
		cfg := sft.DefaultConfig()
		looptest.Common(t, &cfg.Training, 1e-3, batch, accum, 2)
		res, err := sftRun(t, context.Background(), dir, data, cfg, loop.Options{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := safetensors.ReadModelDir(cfg.OutputDir)
		if err != nil {
			t.Fatal(err)
		}
		return res.Last, w
	}
	big, wBig := run(4, 1)
	acc, wAcc := run(2, 2)
	for _, k := range []string{"loss", "grad_norm", "mean_token_accuracy", "num_tokens"} {
		if got, want := acc.Metrics[k], big.Metrics[k]; math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
			t.Errorf("%s: accumulated %v, big batch %v", k, got, want)
		}
	}
	worst := 0.0
	for name, tb := range wBig {
		fb, _ := tb.Float32s()
		fa, _ := wAcc[name].Float32s()
		for i := range fb {
			worst = math.Max(worst, math.Abs(float64(fa[i]-fb[i])))
		}
	}
	t.Logf("max |Δweight| = %.3g after 2 steps (lr 1e-3)", worst)
	// AdamW's first steps move every weight by about lr·g/|g|, which amplifies the round-off of
	// gradients near zero; 1e-5 is 1% of one step.
	if worst > 1e-5 {
		t.Errorf("weights differ by %.3g, want ≤ 1e-5", worst)
	}
}

// Under --bf16 the forward/backward run on bfloat16 copies while AdamW updates float32 masters:
// the loss goes down, the saved model is float32 and equals the masters.
func TestRun_BF16(t *testing.T) {
	dir := looptest.Model(t)
	m := looptest.Load(t, dir, true)
	vars, _, err := m.Params()
	if err != nil {
		t.Fatal(err)
	}
	if vars[0].DType() != dtypes.BFloat16 || m.Master(vars[0]).DType() != dtypes.Float32 {
		t.Fatalf("bf16 model: weight %s, master %s", vars[0].DType(), m.Master(vars[0]).DType())
	}
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-2, 8, 1, 4)
	cfg.BF16 = true
	tr, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 32, 5)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t)})
	first, last := recs[0].Metrics["loss"], recs[len(recs)-1].Metrics["loss"]
	if !(last < first) {
		t.Errorf("bf16 loss %v → %v, want it to go down", first, last)
	}
	w, err := safetensors.ReadModelDir(cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	name := "model.embed_tokens.weight"
	master, _ := m.Master(m.Ctx.GetVariableByScopeAndName("/model/embed_tokens", "weight")).Value()
	want := master.Value().([][]float32)
	got, _ := w[name].Float32s()
	if w[name].DType != "F32" || got[5] != want[0][5] {
		t.Errorf("saved %s: %s %v, want F32 %v (the master)", name, w[name].DType, got[5], want[0][5])
	}
}

// Checkpoints every save_steps, pruned to save_total_limit; each is a loadable HF model directory
// with the optimizer state and trainer_state.json.
func TestRun_SaveStepsAndTotalLimit(t *testing.T) {
	dir := looptest.Model(t)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 4, 1, 5)
	cfg.SaveSteps, cfg.SaveTotalLimit, cfg.LoggingSteps = 2, 2, 2
	res, err := sftRun(t, context.Background(), dir, looptest.MultFile(t, mult.SFT, 8, 6), cfg, loop.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Checkpoints) != 3 { // 2, 4 and the final 5
		t.Errorf("wrote %v, want checkpoints 2, 4, 5", res.Checkpoints)
	}
	cps, err := checkpoint.List(cfg.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cps) != 2 || cps[0].Step != 4 || cps[1].Step != 5 {
		t.Fatalf("kept %v, want checkpoint-4 and checkpoint-5", cps)
	}
	st, err := checkpoint.Load(cps[1].Dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.GlobalStep != 5 || len(st.LogHistory) != 3 { // logged at 2, 4 and the last step
		t.Errorf("trainer_state: step %d, %d log lines; want 5 and 3", st.GlobalStep, len(st.LogHistory))
	}
	looptest.Load(t, cps[0].Dir, false) // an HF model directory: config, weights, tokenizer
}

// lengthGate records the micro-batches the loop asks for and refuses examples longer than limit.
type lengthGate struct {
	loop.Method
	batches [][]int
	limit   int
}

func (g *lengthGate) Batch(idx []int) (named.Feed, error) {
	g.batches = append(g.batches, slices.Clone(idx))
	for _, i := range idx {
		if g.Tokens(i) > g.limit {
			return named.Feed{}, fmt.Errorf("example %d: %d tokens do not fit", i, g.Tokens(i))
		}
	}
	return g.Method.Batch(idx)
}

// Before the first step the loop runs the per_device_train_batch_size longest examples once (the
// largest shape and memory), so a batch that cannot run fails at once, naming its size, and
// nothing is trained; the weights of a run that passes are those of the unchecked computation
// (the bit-exact resume and accumulation tests above run through it too).
func TestRun_PreflightRunsTheLargestBatchFirst(t *testing.T) {
	dir := looptest.Model(t)
	data := looptest.MultFile(t, mult.SFT, 12, 5)
	for _, refuse := range []bool{false, true} {
		cfg := sft.DefaultConfig()
		looptest.Common(t, &cfg.Training, 1e-3, 4, 1, 2)
		m := looptest.Load(t, dir, false)
		tr, err := sft.New(m, looptest.Read(t, data), cfg)
		if err != nil {
			t.Fatal(err)
		}
		longest := make([]int, tr.NumExamples())
		for i := range longest {
			longest[i] = i
		}
		slices.SortStableFunc(longest, func(a, b int) int { return tr.Tokens(b) - tr.Tokens(a) })
		gate := &lengthGate{Method: tr, limit: 1 << 30}
		if refuse {
			gate.limit = tr.Tokens(longest[0]) - 1
		}
		_, err = loop.Run(context.Background(), m, gate, loop.Options{Config: cfg, Backend: looptest.Backend(t)})
		if len(gate.batches) == 0 || !slices.Equal(gate.batches[0], longest[:4]) {
			t.Fatalf("first micro-batch %v, want the 4 longest examples %v", gate.batches, longest[:4])
		}
		switch {
		case !refuse && err != nil:
			t.Fatal(err)
		case refuse && (err == nil || !strings.Contains(err.Error(), "largest micro-batch (4 examples of up to")):
			t.Errorf("error %v, want one naming the largest micro-batch", err)
		case refuse && len(gate.batches) != 1:
			t.Errorf("%d micro-batches asked for after the preflight failed, want none", len(gate.batches)-1)
		}
	}
}

// renamed is a method whose batches name an input differently from what its loss reads.
type renamed struct {
	loop.Method
	from, to string
}

func (r renamed) Batch(idx []int) (named.Feed, error) {
	f, err := r.Method.Batch(idx)
	if err == nil {
		f.Names[slices.Index(f.Names, r.from)] = r.to
	}
	return f, err
}

// A batch whose inputs are not the ones its loss binds (here SFT's loss mask under another name)
// fails when the graph is built, before any step, with both lists of names; nothing is trained.
func TestRun_MisnamedInputFailsAtBuild(t *testing.T) {
	dir := looptest.Model(t)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 2, 1, 1)
	m := looptest.Load(t, dir, false)
	tr, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 4, 5)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = loop.Run(context.Background(), m, renamed{Method: tr, from: "Loss", to: "LossMask"},
		loop.Options{Config: cfg, Backend: looptest.Backend(t)})
	want := "train micro-batch: named: the graph inputs (IDs, Pos, Mask, LossMask) are not trainable.RowInputs's fields " +
		"(IDs, Pos, Mask, Loss): missing Loss; no field for LossMask"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want it to contain %q", err, want)
	}
	if _, err := os.Stat(filepath.Join(cfg.OutputDir, "checkpoint-1")); !os.IsNotExist(err) {
		t.Errorf("checkpoint-1 exists after a failed build (stat: %v)", err)
	}
}
