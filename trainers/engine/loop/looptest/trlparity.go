package looptest

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// TRLGolden is a golden of scripts/reference/trl_parity.py: TRL 0.24.0's own trainer run for 5
// optimizer steps, one entry per case.
type TRLGolden struct {
	Generator string            `json:"generator"`
	Versions  map[string]string `json:"versions"`
	Model     string            `json:"model"`   // repository path of the checkpoint
	Sampler   string            `json:"sampler"` // posttrain: TRL read the rows in loop.Order's order; trl: in its trainer's own
	Common    map[string]any    `json:"common"`
	Cases     map[string]TRLCase
	root      string // the tree it was read from
}

// TRLCase is one TRL run: its options (TRL's config keys, beyond Common) and, per optimizer step,
// TRL's log_history entry with loss_unrounded (the loss before HF's Trainer rounds it to 4
// decimals).
type TRLCase struct {
	Options     map[string]any         `json:"options"`
	Rows        string                 `json:"rows"`     // repository path of the case's JSONL rows
	NumRows     int                    `json:"num_rows"` // TRL's training rows (packed rows with packing)
	Order       []int                  `json:"order"`    // the rows in the order TRL's sampler gave them, pass after pass
	Steps       []map[string]float64   `json:"-"`
	Evals       []map[string]float64   `json:"-"`     // TRL's evaluation entries (eval_strategy steps) without EvalTiming's
	RawSteps    []map[string]jsonFloat `json:"steps"` // Steps as written: NaN as the string "NaN"
	RawEvals    []map[string]jsonFloat `json:"evals"`
	EvalTiming  []string               `json:"eval_timing_keys"` // the wall-clock keys of TRL's evaluation entries
	SummaryKeys []string               `json:"summary_keys"`     // HF's closing entry, which posttrain does not write
}

// Root is the repository's root directory.
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("looptest: no caller information to find the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..")
}

// ReadTRLGolden reads the golden at the repository path rel and, where TRL read the rows in
// posttrain's order (Sampler "posttrain"), checks that it is the one the loop draws (so a change
// of loop.Order says to regenerate the golden). With Sampler "trl" the cases' Order is the one
// TRL's trainer chose itself, which posttrain must follow for the steps to agree.
func ReadTRLGolden(t testing.TB, rel string) *TRLGolden {
	t.Helper()
	return ReadTRLGoldenIn(t, Root(t), rel)
}

// ReadTRLGoldenIn is ReadTRLGolden from the tree root instead of the repository (the reference
// script's --out TREE).
func ReadTRLGoldenIn(t testing.TB, root, rel string) *TRLGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		t.Fatal(err)
	}
	var g TRLGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	g.root = root
	for name, c := range g.Cases {
		c.Steps, c.Evals = floats(c.RawSteps), floats(c.RawEvals)
		g.Cases[name] = c
	}
	seed := int(g.Common["seed"].(float64))
	for name, c := range g.Cases {
		if g.Sampler != "posttrain" {
			continue
		}
		if c.NumRows < 1 || len(c.Order)%c.NumRows != 0 {
			t.Fatalf("%s: case %s: %d rows read of %d", rel, name, len(c.Order), c.NumRows)
		}
		for e := 0; e*c.NumRows < len(c.Order); e++ {
			got, want := c.Order[e*c.NumRows:(e+1)*c.NumRows], loop.Order(c.NumRows, seed, e)
			if !slices.Equal(got, want) {
				t.Fatalf("%s: case %s: TRL read pass %d's rows in %v, but loop.Order(%d, %d, %d) is %v: regenerate with %s",
					rel, name, e, got, c.NumRows, seed, e, want, g.Generator)
			}
		}
	}
	return &g
}

// jsonFloat is a number of a golden, or the string "NaN" (JSON has no NaN; TRL logs one where a
// metric has no sample, e.g. a reward function that scored none of a batch's completions).
type jsonFloat float64

// UnmarshalJSON reads a number or "NaN".
func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	if string(b) == `"NaN"` {
		*f = jsonFloat(math.NaN())
		return nil
	}
	return json.Unmarshal(b, (*float64)(f))
}

// floats converts a golden's entries to plain float64 maps.
func floats(entries []map[string]jsonFloat) []map[string]float64 {
	var out []map[string]float64
	for _, e := range entries {
		m := make(map[string]float64, len(e))
		for k, v := range e {
			m[k] = float64(v)
		}
		out = append(out, m)
	}
	return out
}

// ModelDir copies the golden's checkpoint (in the tree the golden was read from) into a temporary directory with tinymodel's tokenizer
// beside it (the tokenizer TRL ran with) and returns its path.
func (g *TRLGolden) ModelDir(t testing.TB) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(g.root, g.Model))); err != nil {
		t.Fatal(err)
	}
	if err := tinymodel.WriteTokenizer(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// RowsPath is the absolute path of a case's rows.
func (c TRLCase) RowsPath(t testing.TB) string { return filepath.Join(Root(t), c.Rows) }

// Configure loads the case's options (Common, then the case's) into cfg through posttrain's
// YAML config loader, with TRL's keys as they are, and sets a temporary output directory and no
// checkpoints.
func (g *TRLGolden) Configure(t testing.TB, name string, cfg config.Config) TRLCase {
	t.Helper()
	c, ok := g.Cases[name]
	if !ok {
		t.Fatalf("golden has no case %q", name)
	}
	opts := map[string]any{}
	for k, v := range g.Common {
		opts[k] = v
	}
	for k, v := range c.Options {
		opts[k] = v
	}
	doc, err := json.Marshal(opts) // a JSON object is a YAML mapping
	if err != nil {
		t.Fatal(err)
	}
	if err := config.Load(name, doc, cfg); err != nil {
		t.Fatalf("case %s: %v", name, err)
	}
	cfg.Common().OutputDir = filepath.Join(t.TempDir(), "out")
	cfg.Common().SaveSteps = 0
	return c
}

// hfSummary are the keys of the entry HF's Trainer appends to log_history when train() ends,
// which posttrain does not write (its run summary is loop.Result and the log line at the end).
var hfSummary = []string{"epoch", "step", "total_flos", "train_loss", "train_runtime", "train_samples_per_second", "train_steps_per_second"}

// Scale is the magnitude a metric's difference is measured against at a TRL step: the value
// itself, or more where the value is a small difference of large terms (a reward β·(log π −
// log π_ref) at step 1).
type Scale func(key string, trl map[string]float64) float64

// Differences lists the keys that posttrain logs differently from TRL by design, each with the
// check that replaces the comparison (it sees both lines; nil: posttrain leaves the key out,
// which is asserted).
type Differences map[string]func(t testing.TB, step int, trl, got map[string]float64)

// MaxRel collects the largest relative difference of each compared key over a test's steps.
type MaxRel map[string]float64

// CompareTRL compares posttrain's metrics lines with TRL's log entries: the same number of
// optimizer steps; each step's loss (against loss_unrounded, and against TRL's logged loss,
// rounded to 4 decimals, within half a unit of the last decimal), epoch and every other key of
// TRL's entry within rtol relative to max(|TRL's value|, scale); the keys of diff by their own
// checks instead. Every key TRL logs is compared or named in diff, and posttrain may log no key
// TRL does not. The evaluation lines likewise against TRL's evals, their keys without the eval_
// prefix for scale and diff, the wall-clock eval_runtime, eval_samples_per_second and
// eval_steps_per_second (evalTiming) only required to be there. HF's closing summary entry must have
// hfSummary's keys, or be absent (TRL's PPOTrainer writes none; posttrain writes no such entry).
func CompareTRL(t testing.TB, c TRLCase, recs []runlog.Record, rtol float64, scale Scale, diff Differences) MaxRel {
	t.Helper()
	var train, eval []runlog.Record
	for _, r := range recs {
		if r.IsEval() {
			eval = append(eval, r)
		} else {
			train = append(train, r)
		}
	}
	if len(train) != len(c.Steps) || len(eval) != len(c.Evals) {
		t.Fatalf("posttrain logged %d step and %d eval lines, TRL %d and %d", len(train), len(eval), len(c.Steps), len(c.Evals))
	}
	if !slices.Equal(c.SummaryKeys, hfSummary) && len(c.SummaryKeys) > 0 { // none: TRL's PPOTrainer, whose train() is its own loop
		t.Errorf("HF's closing log entry has %v, want %v (posttrain writes none: its metrics.jsonl has the steps only)", c.SummaryKeys, hfSummary)
	}
	if len(c.Evals) > 0 && !slices.Equal(c.EvalTiming, evalTiming) {
		t.Errorf("TRL's evaluation entries have the wall-clock keys %v, want %v", c.EvalTiming, evalTiming)
	}
	worst := MaxRel{}
	cmp := comparison{t: t, rtol: rtol, scale: scale, diff: diff, worst: worst}
	for i, want := range c.Steps {
		cmp.line(fmt.Sprintf("step %d", i+1), "", want, train[i])
	}
	for _, want := range c.Evals {
		r := eval[slices.IndexFunc(eval, func(r runlog.Record) bool { return r.Step == int(want["step"]) })]
		cmp.line(fmt.Sprintf("eval at step %d", r.Step), "eval_", want, r)
	}
	return worst
}

// comparison compares one posttrain line with one TRL entry (CompareTRL).
type comparison struct {
	t     testing.TB
	rtol  float64
	scale Scale
	diff  Differences
	worst MaxRel
}

// evalTiming are HF's wall-clock keys of an evaluation entry, which the golden lists without
// their values: posttrain must log them; their values are not compared.
var evalTiming = []string{"eval_runtime", "eval_samples_per_second", "eval_steps_per_second"}

// line compares the posttrain record got with TRL's entry w, both with the keys' prefix (eval_)
// stripped; at names the line in messages.
func (c comparison) line(at, prefix string, w map[string]float64, r runlog.Record) {
	t := c.t
	t.Helper()
	strip := func(m map[string]float64) map[string]float64 {
		out := map[string]float64{}
		for k, v := range m {
			out[strings.TrimPrefix(k, prefix)] = v
		}
		return out
	}
	want := strip(w)
	got := strip(r.Metrics)
	got["epoch"] = r.Epoch
	if int(want["step"]) != r.Step {
		t.Errorf("%s: posttrain's line is step %d, TRL's %v", at, r.Step, want["step"])
	}
	check := func(key string, w, g float64) {
		if math.IsNaN(w) || math.IsNaN(g) { // TRL's NaN: a metric without a sample
			if !math.IsNaN(w) || !math.IsNaN(g) {
				t.Errorf("%s %s%s: posttrain %v, TRL %v", at, prefix, key, g, w)
			}
			return
		}
		s := math.Abs(w)
		if c.scale != nil {
			s = math.Max(s, c.scale(key, want))
		}
		rel := math.Abs(g - w)
		if s > 0 {
			rel /= s
		}
		c.worst[prefix+key] = math.Max(c.worst[prefix+key], rel)
		if !(rel <= c.rtol) {
			t.Errorf("%s %s%s: posttrain %.9g, TRL %.9g (relative %.2g > %.0e)", at, prefix, key, g, w, rel, c.rtol)
		}
	}
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	for _, key := range slices.Sorted(maps.Keys(keys)) {
		w, inTRL := want[key]
		g, have := got[key]
		switch fn, named := c.diff[key]; {
		case key == "step" || key == "loss_unrounded":
		case prefix != "" && slices.Contains(evalTiming, prefix+key):
			if !have {
				t.Errorf("%s: posttrain does not log %s%s (HF's wall-clock key)", at, prefix, key)
			}
		case named && fn != nil:
			fn(t, r.Step, want, got)
		case named:
			if have {
				t.Errorf("%s: posttrain logs %s%s = %v, which it leaves out by design (TRL: %v)", at, prefix, key, g, w)
			}
		case !inTRL:
			t.Errorf("%s: posttrain logs %s%s = %v, which TRL does not", at, prefix, key, g)
		case !have:
			t.Errorf("%s: posttrain does not log %s%s (TRL: %v)", at, prefix, key, w)
		case key == "loss" && prefix == "":
			check("loss", want["loss_unrounded"], g)
			if d := math.Abs(g - w); d > 0.5e-4+c.rtol*math.Abs(w) {
				t.Errorf("%s loss: posttrain %.9g, TRL logged %.4f (rounded to 4 decimals): %.2g apart", at, g, w, d)
			}
		default:
			check(key, w, g)
		}
	}
}

// Report logs the largest relative differences, one line.
func (m MaxRel) Report(t testing.TB, name string) {
	t.Helper()
	s := ""
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s += fmt.Sprintf(" %s=%.2g", k, m[k])
	}
	t.Logf("%s: largest relative difference from TRL:%s", name, s)
}
