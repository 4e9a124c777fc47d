package decoder

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
)

// tinyDir is the HF-layout tiny random Qwen2 (vocab 1024, 2 layers, GQA 4:2, tied) whose
// expected outputs were computed by an independent float64 PyTorch coding of modeling_qwen2.py.
const tinyDir = "../testdata/qwen2-tiny"

var fixtureCases = []string{"left_pad", "right_pad", "single"}

// pureGoOnly skips a test of a code path that exists only on the pure-Go backend (the decode
// layouts and the split products, made where backend.IsPureGo), naming what it tests.
func pureGoOnly(t testing.TB, b backends.Backend, what string) {
	t.Helper()
	if !backend.IsPureGo(b) {
		t.Skipf("%s: made only on the pure-Go backend (backend.IsPureGo); this run's backend is %q ($%s)", what, backend.ForTests(), backend.TestEnv)
	}
}

// loadTiny loads the tiny checkpoint's config and weights in dtype.
func loadTiny(t testing.TB, dtype dtypes.DType) (*context.Context, *Config) {
	t.Helper()
	return loadFixture(t, tinyDir, dtype)
}

// loadFixture loads the config and weights of the fixture in dir (dir/model) in dtype.
func loadFixture(t testing.TB, dir string, dtype dtypes.DType) (*context.Context, *Config) {
	t.Helper()
	cfg, err := ReadConfig(filepath.Join(dir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	if err := LoadWeights(ctx, cfg, filepath.Join(dir, "model"), dtype); err != nil {
		t.Fatal(err)
	}
	return ctx, cfg
}

// expected is the part of an expected/*.json file the tests compare (the rest is in Report).
type expected struct {
	Report
	PositionIDs [][]int32 `json:"position_ids"`
	Grad        struct {
		L2       map[string]float64 `json:"l2"`
		GlobalL2 float64            `json:"global_l2"`
		PadRowL2 *float64           `json:"pad_row_l2"` // hf_families.py's: row pad_token_id of model.embed_tokens.weight
	} `json:"grad"`
}

func readExpected(t *testing.T, name, dtype string) *expected {
	t.Helper()
	return readExpectedIn(t, tinyDir, name, dtype)
}

// readExpectedIn reads the fixture dir's expected/NAME.DTYPE.json.
func readExpectedIn(t *testing.T, dir, name, dtype string) *expected {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "expected", name+"."+dtype+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var e expected
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	return &e
}

func readInput(t *testing.T, name string) *Batch {
	t.Helper()
	return readInputIn(t, tinyDir, name)
}

// readInputIn reads the fixture dir's inputs/NAME.json.
func readInputIn(t *testing.T, dir, name string) *Batch {
	t.Helper()
	b, _, err := ReadBatchJSON(filepath.Join(dir, "inputs", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func score(t *testing.T, ctx *context.Context, cfg *Config, b *Batch, grad bool) *Report {
	t.Helper()
	res, err := Score(backend.SharedForTests(), ctx, cfg, b, grad)
	if err != nil {
		t.Fatal(err)
	}
	return res.Report(b)
}

func near(got, want, tol float64) bool { return math.Abs(got-want) <= tol }

// checkReport compares a report with the float64 reference: log-probs, loss and logits within
// tol, gradient norms within gradRel relative, checksums within 1e-6 of their scale.
func checkReport(t *testing.T, got *Report, want *expected, tol, gradRel float64) {
	t.Helper()
	if !slices.EqualFunc(got.TokenPositions, want.TokenPositions, slices.Equal) ||
		!slices.EqualFunc(got.TokenIDs, want.TokenIDs, slices.Equal) {
		t.Fatalf("scored tokens: got positions %v ids %v, want %v %v", got.TokenPositions, got.TokenIDs, want.TokenPositions, want.TokenIDs)
	}
	for r := range want.TokenLogProbs {
		for i, w := range want.TokenLogProbs[r] {
			if g := got.TokenLogProbs[r][i]; !near(g, w, tol) {
				t.Errorf("row %d token %d log-prob: got %.7f, want %.7f", r, i, g, w)
			}
		}
		if !near(got.SeqLogProb[r], want.SeqLogProb[r], 5*tol) {
			t.Errorf("row %d seq log-prob: got %.7f, want %.7f", r, got.SeqLogProb[r], want.SeqLogProb[r])
		}
		for i, w := range want.LastLogitsFirst8[r] {
			if g := got.LastLogitsFirst8[r][i]; !near(g, w, tol) {
				t.Errorf("row %d last logit %d: got %.7f, want %.7f", r, i, g, w)
			}
		}
	}
	if got.NCompletionTokens != want.NCompletionTokens || !slices.Equal(got.LastIndex, want.LastIndex) || !slices.Equal(got.LastArgmax, want.LastArgmax) {
		t.Errorf("n/last_index/last_argmax: got %d %v %v, want %d %v %v", got.NCompletionTokens, got.LastIndex, got.LastArgmax,
			want.NCompletionTokens, want.LastIndex, want.LastArgmax)
	}
	if !near(got.Loss, want.Loss, tol) {
		t.Errorf("loss: got %.7f, want %.7f", got.Loss, want.Loss)
	}
	gc, wc := got.LogitsChecksum, want.LogitsChecksum
	scale := wc.AbsSum * 1e-6 // f32 logits summed in f64: observed ≤ 3e-8 of the scale
	if gc.Positions != wc.Positions || !near(gc.Sum, wc.Sum, scale) || !near(gc.AbsSum, wc.AbsSum, scale) ||
		!near(gc.SumSq, wc.SumSq, wc.SumSq*1e-6) || !near(gc.WeightedSum, wc.WeightedSum, scale) {
		t.Errorf("logits checksum: got %+v, want %+v", gc, wc)
	}
	if got.Grad == nil {
		return
	}
	if len(got.Grad.L2) != len(want.Grad.L2) {
		t.Errorf("gradients for %d tensors, want %d", len(got.Grad.L2), len(want.Grad.L2))
	}
	for name, w := range want.Grad.L2 {
		if g, ok := got.Grad.L2[name]; !ok || !near(g, w, gradRel*w) {
			t.Errorf("grad L2 %s: got %.7f, want %.7f", name, g, w)
		}
	}
	if !near(got.Grad.GlobalL2, want.Grad.GlobalL2, gradRel*want.Grad.GlobalL2) {
		t.Errorf("grad global L2: got %.7f, want %.7f", got.Grad.GlobalL2, want.Grad.GlobalL2)
	}
}

func TestScore_MatchesHFFloat64Reference(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	for _, name := range fixtureCases {
		t.Run(name, func(t *testing.T) {
			b := readInput(t, name)
			if got, want := PositionIDs(b.Mask), readExpected(t, name, "float64").PositionIDs; !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("position ids: got %v, want %v", got, want)
			}
			checkReport(t, score(t, ctx, cfg, b, true), readExpected(t, name, "float64"), 1e-4, 1e-4)
		})
	}
}

// Computing the logits one or a few positions at a time gives the same numbers as all at once.
func TestScore_ChunkedEqualsWhole(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	b := readInput(t, "left_pad")
	whole := score(t, ctx, cfg, b, true)
	for _, positions := range []int{1, 5} {
		cfg.ChunkElements = positions * 2 * cfg.VocabSize
		chunked := score(t, ctx, cfg, b, true)
		if d := maxDiff(chunked.TokenLogProbs, whole.TokenLogProbs); d > 1e-6 {
			t.Errorf("%d positions per chunk: log-probs differ by %g", positions, d)
		}
		for name, w := range whole.Grad.L2 {
			if g := chunked.Grad.L2[name]; !near(g, w, 1e-5*w) {
				t.Errorf("%d positions per chunk: grad %s %g, whole %g", positions, name, g, w)
			}
		}
		if !near(chunked.LogitsChecksum.WeightedSum, whole.LogitsChecksum.WeightedSum, 1e-6) {
			t.Errorf("%d positions per chunk: checksum %+v, whole %+v", positions, chunked.LogitsChecksum, whole.LogitsChecksum)
		}
	}
}

func maxDiff(a, b [][]float64) float64 {
	d := 0.0
	for r := range a {
		for i := range a[r] {
			d = math.Max(d, math.Abs(a[r][i]-b[r][i]))
		}
	}
	return d
}

// The same rows give the same log-probs with left padding, right padding and alone.
func TestScore_PaddingInvariance(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	left := score(t, ctx, cfg, readInput(t, "left_pad"), false)
	right := score(t, ctx, cfg, readInput(t, "right_pad"), false)
	if d := maxDiff(left.TokenLogProbs, right.TokenLogProbs); d > 2e-6 {
		t.Errorf("left vs right padding: log-probs differ by %g", d)
	}
	row := readInput(t, "right_pad")
	alone := &Batch{IDs: [][]int32{row.IDs[0][:9]}, Mask: [][]int32{row.Mask[0][:9]}, CompletionStart: []int{4}}
	single := score(t, ctx, cfg, alone, false)
	if d := maxDiff(single.TokenLogProbs, right.TokenLogProbs[:1]); d > 2e-6 {
		t.Errorf("row alone vs in a padded batch: log-probs differ by %g", d)
	}
	if !near(left.Loss, right.Loss, 1e-6) {
		t.Errorf("loss: left %g, right %g", left.Loss, right.Loss)
	}
}

// With chunks of 2 positions no [B,S,V] logits tensor exists in the forward or backward graph:
// every node with a vocabulary axis has at most B·2·V elements.
func TestTokenLogProbs_NoFullLogitsTensor(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	b := readInput(t, "left_pad")
	cfg.ChunkElements = 2 * 2 * cfg.VocabSize
	largest := 0
	exec, err := context.NewExec(backend.SharedForTests(), ctx, func(ctx *context.Context, ids, pos, mask, scored *Node) *Node {
		loss := MeanNLL(TokenLogProbs(ctx, cfg, ids, pos, mask), scored)
		_, grads := Gradients(ctx, loss)
		for _, n := range loss.Graph().Nodes() {
			if s := n.Shape(); n.NumOutputs() == 1 && s.Rank() == 3 && s.Dim(-1) == cfg.VocabSize {
				largest = max(largest, s.Size())
			}
		}
		return Add(loss, ReduceAllSum(grads[0]))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	if _, err := exec.Exec(batchTensors(b)...); err != nil {
		t.Fatal(err)
	}
	if want := 2 * 2 * cfg.VocabSize; largest == 0 || largest > want {
		t.Errorf("largest [B,c,V] node has %d elements, want ≤ %d (and > 0)", largest, want)
	}
}
