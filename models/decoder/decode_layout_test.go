package decoder

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/generate"
)

// x·wᵀ through the decode layout equals the plain DotGeneral, for a layout split over both the
// contracting axis (in/c = 2) and the outputs (k = 2).
func TestMatmulLayout_EqualsDotGeneral(t *testing.T) {
	const rows, out, in = 3, 4096, 128
	dims, ok := decodeLayoutDims(out, in)
	if !ok || dims != [4]int{2, 2, 2048, 64} {
		t.Fatalf("decodeLayoutDims(%d, %d) = %v, %v; want [2 2 2048 64]", out, in, dims, ok)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	xT, wT := randnTensor(rng, 1, rows, in), randnTensor(rng, 1, out, in)
	wl := decodeLayoutOf(tensors.FromFlatDataAndDimensions(tensors.MustCopyFlatData[float32](wT), out, in), dims)
	exec, err := NewExec(backend.SharedForTests(), func(x, w, wl *Node) []*Node {
		w = Reshape(w, out, in)
		return []*Node{matmulLayout(x, wl), DotGeneral(x, []int{2}, nil, w, []int{1}, nil)}
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := exec.Exec(xT, wT, wl)
	if err != nil {
		t.Fatal(err)
	}
	if got := res[0].Shape().Dimensions; len(got) != 3 || got[0] != 1 || got[1] != rows || got[2] != out {
		t.Fatalf("shape %v, want [1 %d %d]", got, rows, out)
	}
	got, want := tensors.MustCopyFlatData[float32](res[0]), tensors.MustCopyFlatData[float32](res[1])
	for j := range want {
		if d := math.Abs(float64(got[j] - want[j])); d > 1e-4*(1+math.Abs(float64(want[j]))) {
			t.Fatalf("[%d]: layout %g, DotGeneral %g", j, got[j], want[j])
		}
	}
}

// layoutConfig is a small random Qwen2 whose projections and LM head all get a decode layout
// (in = 128 and 192: two and three chunks; vocabulary 4096: two output slices).
func layoutConfig(t *testing.T) (*context.Context, *Config) {
	t.Helper()
	cfg, err := Preset("qwen2.5-0.5b")
	if err != nil {
		t.Fatal(err)
	}
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 128, 192, 2
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 4, 2, 32
	cfg.VocabSize, cfg.BOSTokenID, cfg.EOSTokenIDs = 4096, nil, []int{4095}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	if err := InitWeights(ctx, cfg, 7, dtypes.Float32); err != nil {
		t.Fatal(err)
	}
	return ctx, cfg
}

// On the pure-Go backend the cached generation multiplies by the decode layouts, made before the
// prompt pass and made again after a weight changes: it matches the uncached reference (plain
// products) before and after an update, and a layout the weights did not change is not remade.
// On another backend no layout is made, and the cached generation matches the uncached one the
// same way.
func TestGenerate_DecodeLayout(t *testing.T) {
	ctx, cfg := layoutConfig(t)
	b := backend.SharedForTests()
	g := generate.NewGenerator(b, ctx, Arch{Config: cfg})
	defer g.Finalize()
	prompts := [][]int32{{5, 17, 300, 4000, 9}, {77, 1024}}
	opts := generate.Options{MaxNewTokens: 6, IgnoreEOS: true}
	compare := func(when string) { t.Helper(); matchUncached(t, g, prompts, opts, when) }
	compare("first generation")
	for _, scope := range []string{"/model/layers/0/self_attn/q_proj", "/model/layers/1/mlp/down_proj", "/model/embed_tokens"} {
		made := ctx.GetVariableByScopeAndName(decodeLayoutScope+scope, "weight") != nil
		if pureGo := backend.IsPureGo(b); made != pureGo {
			t.Fatalf("decode layout of %s after Generate: made %v, want %v (pure-Go backend %v)", scope, made, pureGo, pureGo)
		}
	}

	// A trainer's update: new tensors for the LM head (the tied embedding) and a projection.
	for _, scope := range []string{"/model/embed_tokens", "/model/layers/1/mlp/up_proj"} {
		v := ctx.GetVariableByScopeAndName(scope, "weight")
		w := tensors.MustCopyFlatData[float32](v.MustValue())
		for i := range w {
			w[i] = -1.5 * w[i]
		}
		if err := v.SetValue(tensors.FromFlatDataAndDimensions(w, v.Shape().Dimensions...)); err != nil {
			t.Fatal(err)
		}
	}
	compare("after a weight update")
	if !backend.IsPureGo(b) {
		return // no layout to zero below
	}

	// The decode step reads the layout: zeroing the LM head's layout (its weight unchanged, so
	// it is kept) makes every logit 0, every token's log-prob −ln V.
	head := ctx.GetVariableByScopeAndName(decodeLayoutScope+"/model/embed_tokens", "weight")
	if err := head.SetValue(tensors.FromShape(head.Shape())); err != nil {
		t.Fatal(err)
	}
	gens, err := g.Generate(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	if lp := gens[0].LogProbs[1]; math.Abs(lp+math.Log(float64(cfg.VocabSize))) > 1e-4 {
		t.Fatalf("decode step with a zeroed LM-head layout: log-prob %.6f, want −ln %d", lp, cfg.VocabSize)
	}
}

// PrepareWeights writes each layout into a buffer of the pure-Go backend (which shares its buffers
// with the host), not into a host tensor that the first execution would copy again: before any
// execution, the layout is on the backend and has no host copy, and it holds w's values.
func TestPrepareWeights_LayoutInBackendBuffer(t *testing.T) {
	ctx, cfg := layoutConfig(t)
	b := backend.SharedForTests()
	pureGoOnly(t, b, "decode layouts")
	if err := (Arch{Config: cfg}).PrepareWeights(ctx, b, 1); err != nil {
		t.Fatal(err)
	}
	const scope = "/model/layers/1/mlp/down_proj"
	lv := ctx.GetVariableByScopeAndName(decodeLayoutScope+scope, "weight")
	if lv == nil {
		t.Fatalf("no decode layout of %s", scope)
	}
	val := lv.MustValue()
	if val.HasLocal() || !val.IsOnDevice(0) {
		t.Fatalf("decode layout of %s: host copy %v, on the backend %v; want only the backend's buffer", scope, val.HasLocal(), val.IsOnDevice(0))
	}
	w := ctx.GetVariableByScopeAndName(scope, "weight").MustValue()
	want := tensors.MustCopyFlatData[float32](decodeLayoutOf(w, [4]int(val.Shape().Dimensions)))
	got := tensors.MustCopyFlatData[float32](val)
	if !slices.Equal(got, want) {
		t.Fatalf("decode layout of %s differs from decodeLayoutOf", scope)
	}
}

// PrepareWeights makes only the layouts that decode steps of its rows read: none for 32 rows (the
// blocked kernel's), for 16 rows those of the projections but not the LM head's (16 × 2048 outputs
// per batch example is past the direct kernel's limit), and a cached generation of 9 sequences
// (bucket 16) over that mix still matches the uncached reference.
func TestPrepareWeights_OnlyLayoutsTheBatchReads(t *testing.T) {
	ctx, cfg := layoutConfig(t)
	b := backend.SharedForTests()
	pureGoOnly(t, b, "decode layouts")
	layout := func(scope string) bool {
		return ctx.GetVariableByScopeAndName(decodeLayoutScope+scope, "weight") != nil
	}
	const proj, head = "/model/layers/0/self_attn/q_proj", "/model/embed_tokens"
	if err := (Arch{Config: cfg}).PrepareWeights(ctx, b, 32); err != nil {
		t.Fatal(err)
	}
	if layout(proj) || layout(head) {
		t.Fatalf("32 rows: layouts of %s %v, of the LM head %v; want none", proj, layout(proj), layout(head))
	}
	if err := (Arch{Config: cfg}).PrepareWeights(ctx, b, 16); err != nil {
		t.Fatal(err)
	}
	if !layout(proj) || layout(head) {
		t.Fatalf("16 rows: layouts of %s %v, of the LM head %v; want the projection's only", proj, layout(proj), layout(head))
	}
	g := generate.NewGenerator(b, ctx, Arch{Config: cfg})
	defer g.Finalize()
	var prompts [][]int32
	for r := range 9 {
		prompts = append(prompts, []int32{int32(5 + r), int32(300 + 7*r), 4000})
	}
	matchUncached(t, g, prompts, generate.Options{MaxNewTokens: 4, IgnoreEOS: true}, "9 sequences")
	if layout(head) {
		t.Error("a generation of 9 sequences made the LM head's layout, which its 16-row decode steps do not read")
	}
}

// matchUncached checks that g's cached generation of prompts gives the uncached reference's tokens
// and log-probs (within 1e-4).
func matchUncached(t *testing.T, g *generate.Generator, prompts [][]int32, opts generate.Options, when string) {
	t.Helper()
	cached, err := g.Generate(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := g.GenerateUncached(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	for r := range ref {
		for i := range ref[r].IDs {
			if cached[r].IDs[i] != ref[r].IDs[i] || math.Abs(cached[r].LogProbs[i]-ref[r].LogProbs[i]) > 1e-4 {
				t.Fatalf("%s: row %d token %d: cached %d (%.6f), uncached %d (%.6f)", when, r, i,
					cached[r].IDs[i], cached[r].LogProbs[i], ref[r].IDs[i], ref[r].LogProbs[i])
			}
		}
	}
}
