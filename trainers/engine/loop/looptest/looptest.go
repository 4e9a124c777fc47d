// Package looptest sets up tiny training runs for the trainers' tests: a random tiny Qwen2
// checkpoint (or a tiny Qwen3 or Llama fixture) with a real (cut-down) Qwen tokenizer, a dataset
// file, a backend and a config.
package looptest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Model writes a tiny random checkpoint into a temporary directory and returns its path.
func Model(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := tinymodel.Write(dir, tinymodel.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Fixtures are the tiny checkpoints of the other families in models/testdata (vocabulary
// tinymodel.VocabSize, bos/eos tinymodel's ids): Qwen3, Llama with llama3 RoPE scaling and
// biases (untied), SmolLM2's Llama form stored bfloat16, SmolLM3 with NoPE layers, and Gemma 3
// (sliding window 4, local RoPE base, logit soft-capping).
var Fixtures = []string{"qwen3-tiny", "llama-tiny", "smollm2-tiny", "smollm3-tiny", "gemma3-tiny"}

// Fixture copies the model of models/testdata/NAME into a temporary directory with tinymodel's
// tokenizer beside it and returns its path.
func Fixture(t testing.TB, name string) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("looptest: no caller information to find models/testdata")
	}
	src := filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "models", "testdata", name, "model")
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if err := tinymodel.WriteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Load loads the checkpoint at dir for training.
func Load(t testing.TB, dir string, bf16 bool) *trainable.Model {
	t.Helper()
	m, err := trainable.LoadModel(dir, bf16)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// MultFile writes n multiplication rows of kind drawn with seed as JSONL and returns the path.
func MultFile(t testing.TB, kind mult.Kind, n int, seed int64) string {
	t.Helper()
	format, rows, err := mult.Rows(kind, n, seed)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), string(kind)+".jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := data.WriteJSONL(f, format, rows); err != nil {
		t.Fatal(err)
	}
	return path
}

// Read reads a dataset file.
func Read(t testing.TB, path string) *data.Dataset {
	t.Helper()
	d, err := data.ReadFile(path, data.FormatAuto)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Backend is the tests' backend (backend.ForTests: pure Go unless $POSTTRAIN_TEST_BACKEND names
// another), one per test binary, shared by every caller: do not Finalize it.
func Backend(t testing.TB) backends.Backend {
	t.Helper()
	return backend.SharedForTests()
}

// Common sets the options every test run shares on c: a temporary output directory, a constant
// learning rate lr, no warmup, batch × accumulation, steps optimizer steps, logging every step.
//
// Gradient checkpointing is off here, for time (its graphs are larger to compile, on XLA above
// all): the checkpointed gradients are held equal to the plain ones by models/decoder's
// TestCheckpointLayers_SameGradients on both backends; TestRun_ResumeEqualsStraight turns it
// back on (TRL's default) for SFT, DPO and KTO, and TestDevices_DataParallelEqualsOneDevice for
// DPO over 2 devices.
func Common(t testing.TB, c *config.Training, lr float64, batch, accum, steps int) {
	c.OutputDir = filepath.Join(t.TempDir(), "out")
	c.GradientCheckpointing = false
	c.LearningRate = lr
	c.LRSchedulerType = "constant"
	c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps = batch, accum
	c.MaxSteps = steps
	c.LoggingSteps = 1
	c.SaveSteps = 0
}

// ReadErr reads a dataset file and returns the reader's error.
func ReadErr(path string) (*data.Dataset, error) { return data.ReadFile(path, data.FormatAuto) }

// Train runs the loop on method with opts (its Config set) and returns the lines of the run's
// metrics.jsonl.
func Train(t testing.TB, m *trainable.Model, method loop.Method, opts loop.Options) []runlog.Record {
	t.Helper()
	if _, err := loop.Run(context.Background(), m, method, opts); err != nil {
		t.Fatal(err)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(opts.Config.Common().OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TrainTRLCase trains m on the rows of TRL golden case c with the method newMethod makes of them
// and, for a case with evaluations, a second method over the same rows as its eval set (as TRL's
// runs do), on the shared test backend; it returns the lines of the run's metrics.jsonl.
func TrainTRLCase(t testing.TB, c TRLCase, m *trainable.Model, cfg config.Config, newMethod func(rows *data.Dataset) (loop.Method, error)) []runlog.Record {
	t.Helper()
	tr, err := newMethod(Read(t, c.RowsPath(t)))
	if err != nil {
		t.Fatal(err)
	}
	var ev loop.Method
	if len(c.Evals) > 0 {
		if ev, err = newMethod(Read(t, c.RowsPath(t))); err != nil {
			t.Fatal(err)
		}
	}
	return Train(t, m, tr, loop.Options{Config: cfg, Backend: Backend(t), Eval: ev})
}

// tokens are the inputs FullLogits reads from a batch.
type tokens[T any] struct{ IDs, Pos, Mask T }

// FullLogits returns the full logits [B,S,V] (flat, float64) and their log-softmax for a batch
// whose Feed has the ids, positions and attention mask of trainable.RowInputs (alone, or embedded in a
// method's inputs) under m's current weights: the tests' outside reference for the trainers'
// chunked in-graph reductions, affordable at the tiny model's vocabulary.
func FullLogits(t testing.TB, b backends.Backend, m *trainable.Model, inputs named.Feed) (logits, logSoftmax []float64) {
	t.Helper()
	cfg := m.Config
	ev, err := step.NewContextEval(b, m.Ctx.Reuse(), func(ctx *mlctx.Context, in named.Inputs) map[string]*Node {
		r := named.Bind[tokens[*Node]](in)
		z := decoder.Logits(ctx, cfg, decoder.Hidden(ctx, cfg, r.IDs, r.Pos, r.Mask))
		return map[string]*Node{"logits": z, "log_softmax": LogSoftmax(z, -1)}
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := ev.Run(named.Of[any](tokens[any]{IDs: inputs.Get("IDs"), Pos: inputs.Get("Pos"), Mask: inputs.Get("Mask")}))
	if err != nil {
		t.Fatal(err)
	}
	return step.Float64s(outs["logits"]), step.Float64s(outs["log_softmax"])
}

// timing reports whether a metric is a wall-clock measurement, which differs between two runs of
// the same computation: TRL's timing_s/* and tokens_per_s/*, PPO's eps (episodes per second), HF's
// eval speed metrics.
func timing(name string) bool {
	name = strings.TrimPrefix(name, "eval_")
	return strings.HasPrefix(name, "timing_s/") || strings.HasPrefix(name, "tokens_per_s/") ||
		name == "runtime" || name == "samples_per_second" || name == "steps_per_second" || name == "eps"
}

// SameMetrics fails t unless the metrics.jsonl files at paths want and got have the same lines,
// each with the same keys in the same order and byte-identical values, apart from the values of
// timing metrics.
func SameMetrics(t testing.TB, want, got string) {
	t.Helper()
	read := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			out = append(out, stripTimings(t, line))
		}
		return out
	}
	w, g := read(want), read(got)
	if len(w) != len(g) {
		t.Errorf("%s: %d lines, %s: %d lines", want, len(w), got, len(g))
	}
	for i := range min(len(w), len(g)) {
		if w[i] != g[i] {
			t.Errorf("metrics line %d differs:\nwant %s\ngot  %s", i+1, w[i], g[i])
		}
	}
}

// stripTimings returns a metrics line (a flat JSON object) as "key=value" pairs in their order,
// the values of timing metrics replaced by "-".
func stripTimings(t testing.TB, line string) string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("metrics line %q is not a JSON object", line)
	}
	var pairs []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		k := key.(string)
		if timing(k) {
			value = json.RawMessage("-")
		}
		pairs = append(pairs, k+"="+string(value))
	}
	return strings.Join(pairs, " ")
}
