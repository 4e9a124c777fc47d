package loop_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/backend/devicetest"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/kto"
	"github.com/posttrain/posttrain/trainers/reward"
	"github.com/posttrain/posttrain/trainers/sft"
)

// dpRun is one data-parallel test run: a fresh copy of the model at dir trained by method c on
// train with perDevice × devices examples per micro-batch, 2 micro-batches per step, steps
// steps, on the 4-device backend.
type dpRun struct {
	c                         resumeCase
	dir, train                string
	perDevice, devices, steps int
	load                      func(t testing.TB, dir string) *trainable.Model // nil: looptest.Load
	fsdp, tp                  bool
	log                       *bytes.Buffer // receives the run's log when set
	out                       string        // output directory (a new one when empty)
	resume                    bool
	stopAt                    int  // > 0: interrupt after this step (a checkpoint is saved)
	checkpointing             bool // gradient checkpointing (looptest.Common turns it off)
}

func (r dpRun) do(t *testing.T) string {
	t.Helper()
	cfg := r.c.cfg()
	tc := cfg.Common()
	looptest.Common(t, tc, 1e-3, r.perDevice, 2, r.steps)
	if r.out != "" {
		tc.OutputDir = r.out
	}
	tc.Devices, tc.Resume, tc.LRSchedulerType, tc.WarmupSteps = r.devices, r.resume, "linear", 1
	tc.GradientCheckpointing = r.checkpointing
	tc.Model, tc.Dataset, tc.FSDP, tc.TensorParallel = r.dir, r.train, r.fsdp, r.tp
	cfg.Resolve()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	b := devicetest.DevicesBackend(t)
	load := r.load
	if load == nil {
		load = func(t testing.TB, dir string) *trainable.Model { return looptest.Load(t, dir, false) }
	}
	m := load(t, r.dir)
	tr := r.c.build(t, b, m, looptest.Read(t, r.train), cfg)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	opts := loop.Options{Config: cfg, Backend: b}
	if r.log != nil {
		opts.Logger = slog.New(slog.NewTextHandler(r.log, nil))
	}
	opts.AfterStep = func(step int) {
		if step == r.stopAt {
			cancel(checkpoint.ErrInterrupted)
		}
	}
	res, err := loop.Run(ctx, m, tr, opts)
	if r.stopAt > 0 {
		if !errors.Is(err, loop.ErrInterrupted) || res == nil || res.Steps != r.stopAt {
			t.Fatalf("%d devices: result %+v, error %v; want interrupted after step %d", r.devices, res, err, r.stopAt)
		}
	} else if err != nil {
		t.Fatalf("%d devices: %v", r.devices, err)
	}
	return tc.OutputDir
}

// closeRuns fails t unless the runs in outputs got and want logged the same steps with the same
// loss and grad_norm, and wrote the same final weights, within rel relative (float32: the
// devices add the gradients in another order).
func closeRuns(t *testing.T, want, got string, rel float64) {
	t.Helper()
	read := func(dir string) []runlog.Record {
		recs, err := runlog.ReadMetrics(filepath.Join(dir, runlog.MetricsName))
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	w, g := read(want), read(got)
	if len(w) != len(g) || len(w) == 0 {
		t.Fatalf("%d metrics lines, want %d (> 0)", len(g), len(w))
	}
	for i := range w {
		for _, k := range []string{"loss", "grad_norm"} {
			a, b := g[i].Metrics[k], w[i].Metrics[k]
			if math.Abs(a-b) > rel*math.Abs(b) || math.IsNaN(a) {
				t.Errorf("step %d %s: %.9g, want %.9g (relative %.2g)", w[i].Step, k, a, b, math.Abs(a-b)/math.Abs(b))
			}
		}
	}
	// A full run's model, or a LoRA run's adapter.
	weights := func(dir string) map[string]*safetensors.Tensor {
		if _, err := os.Stat(filepath.Join(dir, lora.WeightsName)); err == nil {
			ws, _, err := safetensors.ReadFile(filepath.Join(dir, lora.WeightsName))
			if err != nil {
				t.Fatal(err)
			}
			return ws
		}
		ws, err := safetensors.ReadModelDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		return ws
	}
	ww, wg := weights(want), weights(got)
	// The weights are compared as one vector, in the max norm: ‖θ − θ₁‖∞ ≤ rel·‖θ₁‖∞. Per
	// tensor, biases that start at zero hold a few AdamW steps (≈ lr each), and AdamW's
	// m/√v turns the float32 round-off of their gradients into a relative difference of the
	// order of 1e-4 of such a step (logged; TestRun_AccumulationEqualsBigBatch sees the same
	// from grouping the micro-batch sums differently on one device).
	diff, norm, perTensor := 0.0, 0.0, 0.0
	for name, tw := range ww {
		fw, _ := tw.Float32s()
		fg, _ := wg[name].Float32s()
		if len(fw) != len(fg) || len(fw) == 0 {
			t.Fatalf("%s: %d values, want %d", name, len(fg), len(fw))
		}
		d, scale := 0.0, 0.0
		for i := range fw {
			d, scale = math.Max(d, math.Abs(float64(fg[i]-fw[i]))), math.Max(scale, math.Abs(float64(fw[i])))
		}
		diff, norm, perTensor = math.Max(diff, d), math.Max(norm, scale), math.Max(perTensor, d/scale)
	}
	if diff > rel*norm {
		t.Errorf("final weights: ‖Δθ‖∞ %.3g, %.3g of ‖θ‖∞, want ≤ %g", diff, diff/norm, rel)
	}
	t.Logf("%d steps; final weights: ‖Δθ‖∞ %.2g (%.2g of ‖θ‖∞; per tensor at most %.2g of its largest value)", len(w), diff, diff/norm, perTensor)
}

// Data parallel on 2 and 4 of XLA's CPU devices (each micro-batch split along the batch axis by
// the SPMD partitioner, the weights replicated) gives the 1-device run with the same global
// batch: per-step loss and grad_norm, and the final weights, within 1e-5 relative. 11 rows, a
// global micro-batch of 4 and 2 micro-batches per step: 3 steps cross the end of the pass, whose
// last micro-batch of 3 rows does not divide by the devices (it runs replicated).
func TestDevices_DataParallelEqualsOneDevice(t *testing.T) {
	devicetest.DevicesBackend(t) // skips here, not in each subtest, without the plugin
	dir := looptest.Model(t)
	classifier := func(t testing.TB, dir string) *trainable.Model {
		m, _, err := trainable.LoadClassifier(dir, false, 1, 5)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cases := []struct {
		resumeCase
		load          func(t testing.TB, dir string) *trainable.Model
		devices       []int
		checkpointing bool
	}{
		{resumeCases[0], nil, []int{2, 4}, false},
		{resumeCases[1], nil, []int{2}, true}, // checkpointed layers split over devices
		// KTO without its KL term: TRL pairs the KL rows within each device's batch
		// (per_device_train_batch_size), so with the KL term a 2-device run is not the 1-device
		// run of the same global batch.
		{resumeCase{"kto apo_zero_unpaired", mult.KTO, 11, 0, func() config.Config {
			c := kto.DefaultConfig()
			c.LossType = "apo_zero_unpaired"
			return c
		}, resumeCases[2].build}, nil, []int{2}, false},
		{resumeCase{"reward", mult.DPO, 11, 0, func() config.Config { return reward.DefaultConfig() },
			func(t *testing.T, _ backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) loop.Method {
				tr, err := reward.New(m, d, cfg.(*reward.Config))
				if err != nil {
					t.Fatal(err)
				}
				return tr
			}}, classifier, []int{2}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			train := looptest.MultFile(t, c.kind, 11, 3)
			one := dpRun{c: c.resumeCase, dir: dir, train: train, perDevice: 4, devices: 1, steps: 3, load: c.load, checkpointing: c.checkpointing}.do(t)
			for _, n := range c.devices {
				got := dpRun{c: c.resumeCase, dir: dir, train: train, perDevice: 4 / n, devices: n, steps: 3, load: c.load, checkpointing: c.checkpointing}.do(t)
				closeRuns(t, one, got, 1e-5)
			}
		})
	}
}

// A checkpoint written on 4 devices resumes on 1 and on 2, one written on 1 resumes on 4, one
// written with --fsdp on 4 resumes with --fsdp on 2 and without it on 1, and one written with
// --tensor-parallel on 4 resumes data parallel on 2, with the result of the straight 1-device run
// (same global batch; devices, fsdp, tensor_parallel and the matching per_device_train_batch_size
// may change on resume).
func TestDevices_ResumeOnOtherDeviceCounts(t *testing.T) {
	dir := looptest.Model(t)
	c := resumeCases[0]
	train := looptest.MultFile(t, c.kind, 11, 3)
	run := func(devices int, split string) dpRun {
		r := dpRun{c: c, dir: dir, train: train, perDevice: 4 / devices, devices: devices, steps: 4, fsdp: split == "fsdp", tp: split == "tp"}
		if r.tp {
			r.perDevice = 4
		}
		return r
	}
	straight := run(1, "").do(t)
	for _, p := range []struct {
		from, to           int
		fromSplit, toSplit string // "", "fsdp" or "tp" (tensor parallel)
	}{{4, 1, "", ""}, {4, 2, "", ""}, {1, 4, "", ""}, {4, 2, "fsdp", "fsdp"}, {4, 1, "fsdp", ""}, {4, 2, "tp", ""}} {
		first := run(p.from, p.fromSplit)
		first.stopAt = 2
		out := first.do(t)
		then := run(p.to, p.toSplit)
		then.out, then.resume = out, true
		then.do(t)
		t.Logf("written on %d devices (%q), resumed on %d (%q):", p.from, p.fromSplit, p.to, p.toSplit)
		closeRuns(t, straight, out, 1e-5)
	}
}

var stateBytes = regexp.MustCompile(`state_bytes_per_device=(\d+)`)

// With --fsdp on 2 and 4 devices the weights, masters, accumulators and AdamW moments are split
// along their first axis: SFT gives the 1-device run within the same bounds as data parallel, and
// each device holds about 1/N of the state the driver logs for data parallel alone.
func TestDevices_FSDPEqualsOneDevice(t *testing.T) {
	dir := looptest.Model(t)
	c := resumeCases[0]
	train := looptest.MultFile(t, c.kind, 11, 3)
	one := dpRun{c: c, dir: dir, train: train, perDevice: 4, devices: 1, steps: 3}.do(t)
	perDevice := func(r dpRun) (string, int64) {
		r.log = &bytes.Buffer{}
		out := r.do(t)
		m := stateBytes.FindStringSubmatch(r.log.String())
		if m == nil {
			t.Fatalf("no state_bytes_per_device in the log:\n%s", r.log)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return out, n
	}
	_, whole := perDevice(dpRun{c: c, dir: dir, train: train, perDevice: 2, devices: 2, steps: 1})
	for _, n := range []int{2, 4} {
		got, bytes := perDevice(dpRun{c: c, dir: dir, train: train, perDevice: 4 / n, devices: n, steps: 3, fsdp: true})
		closeRuns(t, one, got, 1e-5)
		t.Logf("%d devices: %d state bytes per device with fsdp, %d without", n, bytes, whole)
		if bytes*int64(n) > whole*11/10 || bytes >= whole {
			t.Errorf("%d devices: %d state bytes per device, want about %d / %d", n, bytes, whole, n)
		}
	}
}

// After a micro-batch and an update with FSDP on 2 devices, each weight, accumulator and AdamW
// moment lives as 2 device buffers of half its size (its first axis split), and their bytes
// on one device are what StateBytesPerDevice reports: half of the whole state.
func TestOptimizer_FSDPSplitsTheState(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	m := looptest.Load(t, looptest.Model(t), false)
	tr, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 4, 1)), sft.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	hp := loop.OptimizerConfig{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1, Devices: 2, FSDP: true}
	opt, err := loop.NewOptimizer(b, m, hp, tr.Loss)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	idx := []int{0, 1, 2, 3}
	feed, err := tr.Batch(idx)
	if err != nil {
		t.Fatal(err)
	}
	norm := 0.0
	for _, i := range idx {
		norm += tr.Units(i)
	}
	if _, _, err := opt.Micro(feed, norm); err != nil {
		t.Fatal(err)
	}
	if _, err := opt.Apply(1e-3); err != nil {
		t.Fatal(err)
	}
	vars, names, err := m.Params()
	if err != nil {
		t.Fatal(err)
	}
	var onDevice, whole int64
	for i, v := range vars {
		for _, scope := range []string{"", loop.GradScope, loop.ExpAvgScope, loop.ExpAvgSqScope} {
			x := v
			if scope != "" {
				x = m.Ctx.GetVariableByScopeAndName(scope+v.Scope(), v.Name())
			}
			d, err := x.DistributedValue()
			if err != nil {
				t.Fatalf("%s%s: %v", scope, names[i], err)
			}
			shards := d.Shards()
			full, got := int64(x.Shape().Memory()), int64(shards[0].Shape().Memory())
			if want := full / 2; len(shards) != 2 || (x.Shape().Dimensions[0]%2 == 0 && got != want) {
				t.Errorf("%s%s %s: %d shards of %d bytes, want 2 of %d", scope, names[i], x.Shape(), len(shards), got, want)
			}
			onDevice, whole = onDevice+got, whole+full
		}
	}
	if got := opt.StateBytesPerDevice(); got != onDevice || 2*onDevice > whole {
		t.Errorf("StateBytesPerDevice %d, the shards on device 0 hold %d of %d bytes", got, onDevice, whole)
	}
	t.Logf("%d of %d state bytes on each of 2 devices", onDevice, whole)
}

// Tensor parallel on 2 and 4 of XLA's CPU devices (q/k/v, gate and up split by output rows, o
// and down by input columns; every device given the whole micro-batch) gives the 1-device run
// with the same batch — per-step loss and grad_norm and the final weights within 1e-5 relative —
// for SFT and DPO in full and for SFT with a LoRA adapter on every projection (the frozen base
// split, the adapter replicated); the projections' state lives on each device as 1/N.
func TestDevices_TensorParallelEqualsOneDevice(t *testing.T) {
	devicetest.DevicesBackend(t)
	dir := looptest.Model(t)
	peft := func(t testing.TB, dir string) *trainable.Model {
		m, err := trainable.LoadModelPEFT(dir, false, lora.Config{R: 4, Alpha: 8, TargetModules: []string{lora.AllLinear}}, 7)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, c := range []struct {
		resumeCase
		load func(t testing.TB, dir string) *trainable.Model
		n    []int
	}{{resumeCases[0], nil, []int{2, 4}}, {resumeCases[1], nil, []int{2}}, {resumeCases[0], peft, []int{2}}} {
		name := c.name
		if c.load != nil {
			name += " lora"
		}
		t.Run(name, func(t *testing.T) {
			train := looptest.MultFile(t, c.kind, 11, 3)
			one := dpRun{c: c.resumeCase, dir: dir, train: train, perDevice: 4, devices: 1, steps: 3, load: c.load}.do(t)
			for _, n := range c.n {
				r := dpRun{c: c.resumeCase, dir: dir, train: train, perDevice: 4, devices: n, steps: 3, load: c.load, tp: true, log: &bytes.Buffer{}}
				got := r.do(t)
				if !strings.Contains(r.log.String(), "projections split over") {
					t.Errorf("%d devices: the run does not say it splits the projections:\n%s", n, r.log)
				}
				if m := stateBytes.FindStringSubmatch(r.log.String()); m != nil {
					t.Logf("%d devices: %s state bytes per device", n, m[1])
				}
				closeRuns(t, one, got, 1e-5)
			}
		})
	}
}

// After a micro-batch and an update with tensor parallel on 2 devices, q_proj's weight (and its
// gradient accumulator and AdamW moments) lives as 2 buffers of [out/2, in], o_proj's and
// down_proj's as [out, in/2], and the embedding replicated, whole on each device.
func TestOptimizer_TensorParallelSplitsTheProjections(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	m := looptest.Load(t, looptest.Model(t), false)
	tr, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 4, 1)), sft.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	hp := loop.OptimizerConfig{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1, Devices: 2, TensorParallel: true}
	opt, err := loop.NewOptimizer(b, m, hp, tr.Loss)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	idx := []int{0, 1, 2, 3}
	feed, err := tr.Batch(idx)
	if err != nil {
		t.Fatal(err)
	}
	norm := 0.0
	for _, i := range idx {
		norm += tr.Units(i)
	}
	if _, _, err := opt.Micro(feed, norm); err != nil {
		t.Fatal(err)
	}
	if _, err := opt.Apply(1e-3); err != nil {
		t.Fatal(err)
	}
	vars, names, err := m.Params()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]int{}
	for i, v := range vars {
		axis := -1 // replicated
		switch {
		case strings.HasSuffix(names[i], "q_proj.weight"), strings.HasSuffix(names[i], "gate_proj.weight"):
			axis = 0
		case strings.HasSuffix(names[i], "o_proj.weight"), strings.HasSuffix(names[i], "down_proj.weight"):
			axis = 1
		case strings.HasSuffix(names[i], "embed_tokens.weight"):
		default:
			continue
		}
		for _, scope := range []string{"", loop.GradScope, loop.ExpAvgScope, loop.ExpAvgSqScope} {
			x := v
			if scope != "" {
				x = m.Ctx.GetVariableByScopeAndName(scope+v.Scope(), v.Name())
			}
			d, err := x.DistributedValue()
			if err != nil {
				t.Fatalf("%s%s: %v", scope, names[i], err)
			}
			want := slices.Clone(x.Shape().Dimensions)
			if axis >= 0 {
				want[axis] /= 2
			}
			shards := d.Shards()
			if len(shards) != 2 || !slices.Equal(shards[0].Shape().Dimensions, want) {
				t.Errorf("%s%s %s: %d shards of %v, want 2 of %v", scope, names[i], x.Shape(), len(shards), shards[0].Shape().Dimensions, want)
			}
		}
		seen[axis]++
	}
	if seen[0] == 0 || seen[1] == 0 || seen[-1] == 0 {
		t.Errorf("checked %v (split axis: count): want each of q/gate, o/down and the embedding", seen)
	}
}

// A device count that divides none of the dimensions a split would cut is refused rather than run
// replicated under a log that says it splits (--devices 3 on the tiny model: widths 32, 64, 16);
// one that splits some reports how many it left whole.
func TestOptimizer_SplitThatSplitsNothingIsRefused(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	m := looptest.Load(t, looptest.Model(t), false)
	tr, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 4, 1)), sft.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	hp := loop.OptimizerConfig{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1, Devices: 3, TensorParallel: true}
	if _, err := loop.NewOptimizer(b, m, hp, tr.Loss); err == nil || !strings.Contains(err.Error(), "tensor_parallel (--tensor-parallel) over 3 devices would split nothing") {
		t.Errorf("tensor parallel over 3 devices: %v", err)
	}
	hp.TensorParallel, hp.Devices = false, 2
	hp.FSDP = true
	opt, err := loop.NewOptimizer(b, m, hp, tr.Loss)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	if split, whole, _ := opt.Split(); split == 0 || split+whole == 0 {
		t.Errorf("fsdp over 2 devices: %d tensors split, %d whole", split, whole)
	}
}
