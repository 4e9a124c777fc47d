package reward

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

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// writeRows writes JSONL lines into a temporary file and returns its path.
func writeRows(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "prefs.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// textPairs are standard preference rows a tiny model can learn to rank: the chosen answer ends
// with " yes", the rejected one with " no".
func textPairs(t *testing.T, n int) string {
	var lines []string
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"prompt":"Q%d: is %d even?","chosen":" %d yes","rejected":" %d no"}`, i, i, i, i))
	}
	return writeRows(t, lines...)
}

func load(t *testing.T, dir string) *trainable.Model {
	t.Helper()
	m, fresh, err := trainable.LoadClassifier(dir, false, 1, 5)
	if err != nil || !fresh {
		t.Fatalf("LoadClassifier: fresh %v, %v", fresh, err)
	}
	return m
}

func newTrainer(t *testing.T, m *trainable.Model, path string, cfg *Config) *Trainer {
	t.Helper()
	tr, err := New(m, looptest.Read(t, path), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Step one's loss and metrics are TRL's formulas on the rewards the scorer gives the starting
// weights (one step over every pair), and training makes the model rank the pairs: accuracy 1
// and the loss well below ln 2. The final model is a classification checkpoint whose scorer gives
// the trained model's rewards.
func TestReward_StepOneAndLearns(t *testing.T) {
	const n = 8
	path := textPairs(t, n)
	m := load(t, looptest.Model(t))
	cfg := DefaultConfig()
	looptest.Common(t, &cfg.Training, 2e-2, n, 1, 12)
	tr := newTrainer(t, m, path, cfg)
	b := looptest.Backend(t)
	sc, err := trainable.NewScorer(b, m, 3)
	if err != nil {
		t.Fatal(err)
	}
	r, err := sc.Score(append(slices.Clone(tr.chosen), tr.rejected...))
	if err != nil {
		t.Fatal(err)
	}
	var loss, acc, margin float64
	for i := range n {
		z := r[i] - r[n+i]
		loss += softplus(-z) / n
		margin += z / n
		if z > 0 {
			acc += 1.0 / n
		}
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
	first, last := recs[0].Metrics, recs[len(recs)-1].Metrics
	t.Logf("step 1: %v", first)
	t.Logf("step %d: %v", recs[len(recs)-1].Step, last)
	want := map[string]float64{"loss": loss, "accuracy": acc, "margin": margin, "min_reward": slices.Min(r), "max_reward": slices.Max(r)}
	for k, v := range want {
		if got := first[k]; math.Abs(got-v) > 1e-5 {
			t.Errorf("step 1 %s = %v, want %v (from the scorer's rewards)", k, got, v)
		}
	}
	tokens := 0
	for i := range n {
		tokens += tr.Tokens(i)
	}
	if first["num_tokens"] != float64(tokens) {
		t.Errorf("step 1 num_tokens = %v, want %d", first["num_tokens"], tokens)
	}
	if !(last["accuracy"] == 1 && last["loss"] < 0.3) {
		t.Errorf("after %d steps: accuracy %v, loss %v; want 1 and < 0.3", len(recs), last["accuracy"], last["loss"])
	}
	after, err := sc.Score(append(slices.Clone(tr.chosen), tr.rejected...))
	if err != nil {
		t.Fatal(err)
	}
	// The same batch as sc's, so that both score at the same shapes: on XLA a float32 sum's
	// round-off depends on the shape it runs at (docs/xla.md), and the claim is about the weights.
	saved, err := trainable.LoadScorer(b, cfg.OutputDir, false, 3)
	if err != nil {
		t.Fatal(err)
	}
	got, err := saved.Score(append(slices.Clone(tr.chosen), tr.rejected...))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, after) {
		t.Errorf("the saved model's rewards %v, the trained model's %v", got, after)
	}
	if _, err := trainable.LoadScorer(b, looptest.Model(t), false, 8); err == nil || !strings.Contains(err.Error(), "causal LM") {
		t.Errorf("a causal LM as reward model: error %v, want one naming it", err)
	}
}

// The reward head's gradient (and a decoder weight's, through the last-token pick) against
// central finite differences of the same loss graph (margins and center_rewards_coefficient on).
func TestReward_GradientFiniteDifferences(t *testing.T) {
	m := load(t, looptest.Model(t))
	cfg := DefaultConfig()
	cfg.CenterRewardsCoefficient = 0.3
	tr := newTrainer(t, m, writeRows(t,
		`{"prompt":"a","chosen":" b c","rejected":" d","margin":0.25}`,
		`{"prompt":"xy","chosen":" z","rejected":" w v u","margin":-1}`), cfg)
	feed, err := tr.Batch([]int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	b := looptest.Backend(t)
	head := m.Ctx.GetVariableByScopeAndName("/score", "weight")
	norm := m.Ctx.GetVariableByScopeAndName("/model/norm", "weight")
	var sig named.Signature
	exec, err := mlctx.NewExec(b, m.Ctx.Reuse(), func(ctx *mlctx.Context, nodes []*Node) []*Node {
		g := nodes[0].Graph()
		loss, _ := tr.Loss(ctx, sig.Inputs(nodes), Scalar(g, loss32, 2))
		grads := Gradient(loss, head.ValueGraph(g), norm.ValueGraph(g))
		return []*Node{loss, grads[0], grads[1]}
	})
	if err != nil {
		t.Fatal(err)
	}
	args, err := sig.Args(feed)
	if err != nil {
		t.Fatal(err)
	}
	run := func() []*tensors.Tensor {
		outs, err := exec.Exec(args...)
		if err != nil {
			t.Fatal(err)
		}
		return outs
	}
	base := run()
	for _, c := range []struct {
		v    *mlctx.Variable
		grad *tensors.Tensor
		idx  []int
	}{{head, base[1], []int{0, 3, 17}}, {norm, base[2], []int{1, 30}}} {
		w := tensors.MustCopyFlatData[float32](c.v.MustValue())
		grad := tensors.MustCopyFlatData[float32](c.grad)
		const h = 1e-2
		for _, i := range c.idx {
			at := func(d float32) float64 {
				x := slices.Clone(w)
				x[i] += d
				if err := c.v.SetValue(tensors.FromFlatDataAndDimensions(x, c.v.Shape().Dimensions...)); err != nil {
					t.Fatal(err)
				}
				return float64(tensors.MustCopyFlatData[float32](run()[0])[0])
			}
			fd := (at(h) - at(-h)) / (2 * h)
			if err := c.v.SetValue(tensors.FromFlatDataAndDimensions(w, c.v.Shape().Dimensions...)); err != nil {
				t.Fatal(err)
			}
			if got := float64(grad[i]); math.Abs(got-fd) > 2e-5+1e-3*math.Abs(fd) { // float32 loss: its rounding/(2h) ≈ 5e-6
				t.Errorf("%s[%d]: autodiff %v, finite difference %v", c.v.Name(), i, got, fd)
			} else {
				t.Logf("%s/%s[%d]: autodiff %.6g, finite difference %.6g", c.v.Scope(), c.v.Name(), i, got, fd)
			}
		}
	}
}

// TRL's preference formats give one encoding: an implicit prompt (extracted from chosen and
// rejected, then joined back) is the explicit one, standard text gets the EOS, a conversation is
// rendered whole by the chat template; margins are read, must be in every row or none, and pairs
// over max_length are dropped with a warning.
func TestReward_FormatsMarginsAndMaxLength(t *testing.T) {
	m := load(t, looptest.Model(t))
	cfg := DefaultConfig()
	explicit := newTrainer(t, m, writeRows(t, `{"prompt":"Q: 2×3?","chosen":" 6","rejected":" 5","margin":1.5}`), cfg)
	implicit := newTrainer(t, m, writeRows(t, `{"chosen":"Q: 2×3? 6","rejected":"Q: 2×3? 5","margin":1.5}`), cfg)
	if !slices.Equal(explicit.chosen[0], implicit.chosen[0]) || !slices.Equal(explicit.rejected[0], implicit.rejected[0]) {
		t.Errorf("standard: explicit %v/%v, implicit %v/%v", explicit.chosen, explicit.rejected, implicit.chosen, implicit.rejected)
	}
	if ids := explicit.chosen[0]; ids[len(ids)-1] != tinymodel.IMEnd {
		t.Errorf("standard chosen %v does not end with the EOS %d", ids, tinymodel.IMEnd)
	}
	if explicit.margin[0] != 1.5 {
		t.Errorf("margin %v, want 1.5", explicit.margin)
	}
	convPath := looptest.MultFile(t, mult.DPO, 3, 4)
	conv := newTrainer(t, m, convPath, cfg)
	d := looptest.Read(t, convPath)
	for i, r := range d.Rows {
		whole := data.Text{Messages: append(slices.Clone(r.Prompt.Messages), r.Chosen.Messages...)}
		text, err := m.Text.Template.Render(whole.Messages, chatOptions())
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Text.Tokenizer.Decode(int32sToInts(conv.chosen[i]), false); got != text {
			t.Errorf("row %d: conversational chosen decodes to %q, want the template's %q", i, got, text)
		}
	}
	implicitConv := writeRows(t, `{"chosen":[{"role":"user","content":"2×3?"},{"role":"assistant","content":"6"}],"rejected":[{"role":"user","content":"2×3?"},{"role":"assistant","content":"5"}]}`)
	explicitConv := writeRows(t, `{"prompt":[{"role":"user","content":"2×3?"}],"chosen":[{"role":"assistant","content":"6"}],"rejected":[{"role":"assistant","content":"5"}]}`)
	ic, ec := newTrainer(t, m, implicitConv, cfg), newTrainer(t, m, explicitConv, cfg)
	if !slices.Equal(ic.chosen[0], ec.chosen[0]) || !slices.Equal(ic.rejected[0], ec.rejected[0]) {
		t.Errorf("conversational: implicit %v, explicit %v", ic.chosen, ec.chosen)
	}
	for _, bad := range []struct{ rows []string }{
		{[]string{`{"prompt":"a","chosen":" b","rejected":" c","margin":1}`, `{"prompt":"a","chosen":" b","rejected":" d"}`}},
		{[]string{`{"prompt":"a","chosen":" b","rejected":" c"}`, `{"prompt":"a","chosen":" b","rejected":" d","margin":2}`}},
		{[]string{`{"prompt":"a","chosen":" b","rejected":" c","margin":"x"}`}},
	} {
		if _, err := New(m, looptest.Read(t, writeRows(t, bad.rows...)), cfg); err == nil || !strings.Contains(err.Error(), "margin") {
			t.Errorf("rows %v: error %v, want one about the margin column", bad.rows, err)
		}
	}
	short := *cfg
	short.MaxLength = len(explicit.chosen[0])
	tr := newTrainer(t, m, writeRows(t, `{"prompt":"Q: 2×3?","chosen":" 6","rejected":" 5"}`, `{"prompt":"Q: 2×3?","chosen":" 6 6 6 6","rejected":" 5"}`), &short)
	if tr.NumExamples() != 1 || len(tr.Warnings()) != 1 {
		t.Errorf("max_length %d: %d pairs kept, warnings %v; want 1 and one warning", short.MaxLength, tr.NumExamples(), tr.Warnings())
	}
	if _, err := New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 2, 1)), cfg); err == nil {
		t.Error("prompt-completion rows: no error")
	}
}

// A run interrupted after step 2 and resumed ends with the same weights (score head included),
// optimizer state and metrics as one straight run, on every family (looptest.Fixtures).
func TestReward_ResumeIsExact(t *testing.T) {
	for _, fixture := range append([]string{"qwen2"}, looptest.Fixtures...) {
		t.Run(fixture, func(t *testing.T) {
			dir := looptest.Model(t)
			if fixture != "qwen2" {
				dir = looptest.Fixture(t, fixture)
			}
			path := textPairs(t, 6)
			run := func(out string, cancelAt int, resume bool) (*loop.Result, error) {
				m := load(t, dir)
				cfg := DefaultConfig()
				looptest.Common(t, &cfg.Training, 1e-2, 2, 2, 4)
				cfg.OutputDir, cfg.Resume, cfg.SaveSteps = out, resume, 2
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				return loop.Run(ctx, m, newTrainer(t, m, path, cfg), loop.Options{Config: cfg, Backend: looptest.Backend(t), AfterStep: func(step int) {
					if step == cancelAt {
						cancel(checkpoint.ErrInterrupted)
					}
				}})
			}
			straight, resumed := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
			if _, err := run(straight, -1, false); err != nil {
				t.Fatal(err)
			}
			if _, err := run(resumed, 2, false); !errors.Is(err, loop.ErrInterrupted) {
				t.Fatalf("interrupted run: %v", err)
			}
			if _, err := run(resumed, -1, true); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"model.safetensors", "checkpoint-4/optimizer.safetensors"} {
				a, _ := os.ReadFile(filepath.Join(straight, name))
				b, _ := os.ReadFile(filepath.Join(resumed, name))
				if len(a) == 0 || !bytes.Equal(a, b) {
					t.Errorf("%s differs between the straight and the resumed run", name)
				}
			}
			looptest.SameMetrics(t, filepath.Join(straight, runlog.MetricsName), filepath.Join(resumed, runlog.MetricsName))
			cfg, err := decoder.ReadConfig(straight)
			if err != nil || cfg.NumLabels != 1 || cfg.PadTokenID == nil || *cfg.PadTokenID != tinymodel.EndOfText {
				t.Errorf("saved config: %+v, %v; want num_labels 1, pad_token_id %d", cfg, err, tinymodel.EndOfText)
			}
		})
	}
}

const loss32 = dtypes.Float32

func chatOptions() chat.Options { return chat.Options{} }

func int32sToInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// A reward model checkpoint without pad_token_id is scored before the tokenizer's pad_token (TRL's
// GRPOTrainer sets it so); one with a pad_token_id keeps the one it was trained with.
func TestLoadScorer_PadToken(t *testing.T) {
	m := load(t, looptest.Model(t))
	dir := filepath.Join(t.TempDir(), "rm")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	s, err := trainable.LoadScorer(looptest.Backend(t), dir, false, 2)
	if err != nil {
		t.Fatal(err)
	}
	if p := s.Model.Config.PadTokenID; p == nil || *p != tinymodel.EndOfText {
		t.Errorf("no pad_token_id in config.json: scored before %v, want the tokenizer's pad %d", p, tinymodel.EndOfText)
	}
	pad := tinymodel.IMStart
	m.Config.PadTokenID = &pad
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	if s, err = trainable.LoadScorer(looptest.Backend(t), dir, false, 2); err != nil || *s.Model.Config.PadTokenID != pad {
		t.Errorf("pad_token_id %d in config.json: scored before %v (%v)", pad, s.Model.Config.PadTokenID, err)
	}
}
