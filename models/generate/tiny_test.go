package generate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// The Generator's tests run the tiny random Qwen2 of ../testdata/qwen2-tiny (vocab 1024, 2 layers,
// GQA 4:2, tied) through decoder.Arch, against the expected outputs an independent float64 PyTorch
// coding of modeling_qwen2.py computed.
const tinyDir = "../testdata/qwen2-tiny"

// tinyModel is the fixture's weights in a context, with the backend and config that scoring
// (decoder.Score) needs beside the Generator.
type tinyModel struct {
	backend backends.Backend
	ctx     *context.Context
	cfg     *decoder.Config
}

// loadTiny loads the tiny checkpoint's config and weights in dtype.
func loadTiny(t testing.TB, dtype dtypes.DType) *tinyModel {
	t.Helper()
	cfg, err := decoder.ReadConfig(filepath.Join(tinyDir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	if err := decoder.LoadWeights(ctx, cfg, filepath.Join(tinyDir, "model"), dtype); err != nil {
		t.Fatal(err)
	}
	return &tinyModel{backend: backend.SharedForTests(), ctx: ctx, cfg: cfg}
}

// generator is a Generator of m, finalized when the test ends.
func (m *tinyModel) generator(t testing.TB) *generate.Generator {
	g := generate.NewGenerator(m.backend, m.ctx, decoder.Arch{Config: m.cfg})
	t.Cleanup(g.Finalize)
	return g
}

// tinyGenerator is a Generator of the float32 fixture.
func tinyGenerator(t *testing.T) (*generate.Generator, *tinyModel) {
	t.Helper()
	m := loadTiny(t, dtypes.Float32)
	return m.generator(t), m
}

// score is decoder.Score of batch on m (no gradients).
func (m *tinyModel) score(t *testing.T, batch *decoder.Batch) *decoder.ScoreResult {
	t.Helper()
	res, err := decoder.Score(m.backend, m.ctx, m.cfg, batch, false)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readInput(t *testing.T, name string) *decoder.Batch {
	t.Helper()
	b, _, err := decoder.ReadBatchJSON(filepath.Join(tinyDir, "inputs", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// expectedGeneration is the "generation" section of an expected/*.json file: HF's greedy tokens
// without EOS stopping, with and without its KV cache, and their log-probs.
type expectedGeneration struct {
	MaxNewTokens  int         `json:"max_new_tokens"`
	TokensCache   [][]int32   `json:"tokens_cache"`
	TokensNoCache [][]int32   `json:"tokens_nocache"`
	LogProbsCache [][]float64 `json:"logprobs_cache"`
}

func readExpectedGeneration(t *testing.T, name string) *expectedGeneration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tinyDir, "expected", name+".float64.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Generation *expectedGeneration `json:"generation"`
	}
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatal(err)
	}
	if e.Generation == nil {
		t.Fatalf("%s has no generation section", name)
	}
	return e.Generation
}

func mustGenerate(t *testing.T, g *generate.Generator, cached bool, prompts [][]int32, opts generate.Options) []generate.Generation {
	t.Helper()
	gen := g.Generate
	if !cached {
		gen = g.GenerateUncached
	}
	out, err := gen(prompts, opts)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func genIDs(gens []generate.Generation) [][]int32 {
	out := make([][]int32, len(gens))
	for i, g := range gens {
		out[i] = g.IDs
	}
	return out
}
