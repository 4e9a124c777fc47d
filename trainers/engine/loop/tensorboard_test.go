package loop_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/internal/tensorboard"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// killed is the panic value that stands for a run killed after a step.
type killed struct{}

// report_to tensorboard: the event files under OUTPUT_DIR/runs/ hold every metric of every
// metrics.jsonl line (training and eval) at its step, with HF's tags and the float32 of the
// logged value. A run killed after logging step 3 with its last checkpoint at step 2, then resumed,
// reads back (all event files of its run directory, as written) exactly one value per (tag, step),
// equal to a straight run's (timings aside), in one run directory.
//
// With POSTTRAIN_TB_DUMP=DIR the output directories of the straight run, the killed run and the
// resumed run are copied to DIR/straight, DIR/killed and DIR/resumed, for
// scripts/reference/tensorboard_check.py (TensorBoard's own reader).
func TestRun_ReportToTensorBoard(t *testing.T) {
	dump := os.Getenv("POSTTRAIN_TB_DUMP")
	copyOut := func(out, name string) {
		if dump != "" {
			if err := os.CopyFS(filepath.Join(dump, name), os.DirFS(out)); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := looptest.Model(t)
	c := resumeCases[0] // sft
	train := looptest.MultFile(t, c.kind, c.rows, 3)
	eval := looptest.MultFile(t, c.kind, c.evals, 4)
	newConfig := func() config.Config {
		cfg := c.cfg()
		tc := cfg.Common()
		looptest.Common(t, tc, 1e-3, 4, 1, 4)
		tc.LoggingSteps, tc.SaveSteps, tc.ReportTo = 1, 2, []string{"tensorboard"}
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
	copyOut(straight, "straight")
	want := readRun(t, straight)
	checkAgainstMetrics(t, straight, want)

	cfg = newConfig()
	resumed := cfg.Common().OutputDir
	func() {
		defer func() {
			if r := recover(); r != (killed{}) {
				panic(r)
			}
		}()
		c.run(t, context.Background(), dir, train, eval, cfg, loop.Options{AfterStep: func(step int) {
			if step == 3 {
				panic(killed{})
			}
		}})
		t.Fatal("the run was not killed")
	}()
	if got := readRun(t, resumed); got[key{"train/loss", 3}] == 0 || len(got) == 0 {
		t.Fatalf("the killed run did not log step 3: %v", got)
	}
	copyOut(resumed, "killed")
	cfg.Common().Resume = true
	if res, err := c.run(t, context.Background(), dir, train, eval, cfg, loop.Options{}); err != nil || res.Steps != 4 {
		t.Fatalf("resumed run: %+v, %v", res, err)
	}
	copyOut(resumed, "resumed")
	got := readRun(t, resumed)
	checkAgainstMetrics(t, resumed, got)
	if len(got) != len(want) {
		t.Errorf("%d (tag, step) pairs after the resume, %d straight", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok {
			t.Errorf("%s at step %d: missing after the resume", k.tag, k.step)
		} else if g != w && !timing(k.tag) {
			t.Errorf("%s at step %d: %g after the resume, %g straight", k.tag, k.step, g, w)
		}
	}
}

type key struct {
	tag  string
	step int64
}

// timing reports whether a tag is a wall-clock measurement (looptest.SameMetrics's rule).
func timing(tag string) bool {
	name := tag[strings.Index(tag, "/")+1:]
	return strings.HasPrefix(name, "timing_s/") || strings.HasPrefix(name, "tokens_per_s/") ||
		name == "runtime" || name == "samples_per_second" || name == "steps_per_second"
}

// readRun reads the one run directory under out/runs/ and returns its scalars, failing on a
// second value of a (tag, step).
func readRun(t *testing.T, out string) map[key]float32 {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(out, tensorboard.RunsDir, "*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("run directories %v (%v); want one", dirs, err)
	}
	evs, err := tensorboard.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	m := map[key]float32{}
	for _, s := range tensorboard.Scalars(evs) {
		k := key{s.Tag, s.Step}
		if _, dup := m[k]; dup {
			t.Errorf("%s: %s at step %d written twice", dirs[0], s.Tag, s.Step)
		}
		m[k] = s.Value
	}
	return m
}

// checkAgainstMetrics checks that the scalars are exactly metrics.jsonl's values: each metric of
// each line at its step, and the epoch, as float32, and nothing else.
func checkAgainstMetrics(t *testing.T, out string, scalars map[key]float32) {
	t.Helper()
	recs, err := runlog.ReadMetrics(filepath.Join(out, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[key]bool{}
	evals := 0
	for _, r := range recs {
		if r.IsEval() {
			evals++
		}
		kv := map[string]float64{"train/epoch": r.Epoch}
		for k, v := range r.Metrics {
			kv[tensorboard.Tag(k)] = v
		}
		for tag, v := range kv {
			k := key{tag, int64(r.Step)}
			seen[k] = true
			if g, ok := scalars[k]; !ok {
				t.Errorf("%s at step %d (metrics.jsonl %g): no scalar", tag, r.Step, v)
			} else if math.Float32bits(g) != math.Float32bits(float32(v)) {
				t.Errorf("%s at step %d: scalar %g, metrics.jsonl %g", tag, r.Step, g, v)
			}
		}
	}
	for k := range scalars {
		if !seen[k] {
			t.Errorf("%s at step %d: not in metrics.jsonl", k.tag, k.step)
		}
	}
	if len(recs) != 6 || evals != 2 || len(scalars) < 20 {
		t.Errorf("%d lines (%d eval), %d scalars; want 4 training and 2 eval lines", len(recs), evals, len(scalars))
	}
}

// overwrite_output_dir removes OUTPUT_DIR/runs/ with the rest of the previous run; runs/ alone
// does not make the directory hold a previous run.
func TestRunFiles_TensorBoardRuns(t *testing.T) {
	out := t.TempDir()
	if err := os.MkdirAll(filepath.Join(out, tensorboard.RunsDir, "Dec01_15-04-05_host"), 0o755); err != nil {
		t.Fatal(err)
	}
	owned, err := loop.RunFiles.Owned(out)
	if err != nil || len(owned) != 1 || owned[0] != tensorboard.RunsDir {
		t.Errorf("owned %v, %v; want [runs]", owned, err)
	}
	if prev, err := loop.RunFiles.Previous(out); err != nil || len(prev) != 0 {
		t.Errorf("previous run %v, %v; want none", prev, err)
	}
}
