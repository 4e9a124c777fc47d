package generate_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// The tiny Qwen3, Llama (llama3 RoPE, biases, untied) and SmolLM2-form (bfloat16) fixtures of
// scripts/reference/tiny_checkpoints.py, with the greedy generations of its PyTorch reference.
var familyDirs = []string{"../testdata/qwen3-tiny", "../testdata/llama-tiny", "../testdata/smollm2-tiny",
	"../testdata/smollm3-tiny", "../testdata/gemma3-tiny", "../testdata/gemma3-bf16-tiny"}

// With and without the KV cache, every family's greedy tokens and their log-probs are the
// reference's (which are the same with and without its own cache).
func TestGenerate_FamiliesGreedyMatchReference(t *testing.T) {
	for _, dir := range familyDirs {
		t.Run(filepath.Base(dir), func(t *testing.T) { checkGreedyMatches(t, dir, false) })
	}
}

// hfFamilyDirs are the tiny checkpoints transformers itself wrote (scripts/reference/hf_families.py:
// every family, tied and untied, float32 and bfloat16, by transformers 4.57.6 and 5.24.0), with the
// tokens and log-probs of generate(do_sample=False, use_cache=True and False) in float64.
var hfFamilyDirs = []string{
	"../testdata/hf-5.24.0/qwen2", "../testdata/hf-5.24.0/qwen3", "../testdata/hf-5.24.0/llama3",
	"../testdata/hf-5.24.0/smollm2", "../testdata/hf-5.24.0/smollm3", "../testdata/hf-5.24.0/gemma3",
	"../testdata/hf-4.57.6/qwen2", "../testdata/hf-4.57.6/qwen3", "../testdata/hf-4.57.6/llama3",
	"../testdata/hf-4.57.6/smollm2", "../testdata/hf-4.57.6/smollm3", "../testdata/hf-4.57.6/gemma3",
}

// With and without the KV cache, posttrain's greedy tokens are transformers' generate() tokens and
// their log-probs within 1e-5 of its float64 ones, on a left-padded batch (5 new tokens) and a
// single row (8: past Gemma 3's window of 4).
func TestGenerate_HFFamiliesGreedyMatchTransformers(t *testing.T) {
	for _, dir := range hfFamilyDirs {
		t.Run(filepath.Base(filepath.Dir(dir))+"/"+filepath.Base(dir), func(t *testing.T) {
			// XLA compiles each prompt, step and uncached graph for seconds: the 12 fixtures took
			// 218 s on xla:cpu (1.4 s on the pure-Go backend); there the transformers 5.24.0 set
			// (every family) runs, the 4.57.6 one differing only in config form and weights.
			if !backend.IsPureGo(backend.SharedForTests()) && filepath.Base(filepath.Dir(dir)) != "hf-5.24.0" {
				t.Skipf("on %q only the hf-5.24.0 set runs (all of them on the pure-Go backend)", backend.ForTests())
			}
			checkGreedyMatches(t, dir, !backend.IsPureGo(backend.SharedForTests()))
		})
	}
}

// checkGreedyMatches loads the fixture in dir in float32 and compares the generator's greedy
// tokens and log-probs, cached and uncached, with expected/{left_pad,single}.float64.json
// (leftPadOnly: left_pad only).
func checkGreedyMatches(t *testing.T, dir string, leftPadOnly bool) {
	t.Helper()
	cfg, err := decoder.ReadConfig(filepath.Join(dir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.New()
	if err := decoder.LoadWeights(ctx, cfg, filepath.Join(dir, "model"), dtypes.Float32); err != nil {
		t.Fatal(err)
	}
	g := generate.NewGenerator(backend.SharedForTests(), ctx, decoder.Arch{Config: cfg})
	t.Cleanup(g.Finalize)
	names := []string{"left_pad", "single"}
	if leftPadOnly {
		names = names[:1]
	}
	for _, name := range names {
		want := readFamilyGeneration(t, dir, name)
		if !slices.EqualFunc(want.TokensCache, want.TokensNoCache, slices.Equal) {
			t.Fatalf("%s: reference cached %v and uncached %v differ", name, want.TokensCache, want.TokensNoCache)
		}
		b, _, err := decoder.ReadBatchJSON(filepath.Join(dir, "inputs", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		opts := generate.Options{MaxNewTokens: want.MaxNewTokens, IgnoreEOS: true}
		worst := 0.0
		for _, cached := range []bool{true, false} {
			gens := mustGenerate(t, g, cached, decoder.PromptsFromBatch(b), opts)
			if got := genIDs(gens); !slices.EqualFunc(got, want.TokensCache, slices.Equal) {
				t.Errorf("%s cached=%v: got %v, want %v", name, cached, got, want.TokensCache)
			}
			for r, gen := range gens {
				for i, lp := range gen.LogProbs {
					d := math.Abs(lp - want.LogProbsCache[r][i])
					worst = max(worst, d)
					if d > 1e-5 {
						t.Errorf("%s cached=%v row %d token %d: log-prob %v, want %v", name, cached, r, i, lp, want.LogProbsCache[r][i])
					}
				}
			}
		}
		t.Logf("%s: max |Δ log-prob| %.2g", name, worst)
	}
}

func readFamilyGeneration(t *testing.T, dir, name string) *expectedGeneration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "expected", name+".float64.json"))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Generation *expectedGeneration `json:"generation"`
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Generation == nil {
		t.Fatalf("%s: no generation section (%v)", name, err)
	}
	return e.Generation
}

// With bfloat16 weights (and a bfloat16 KV cache) every family's cached and uncached greedy
// generations agree.
func TestGenerate_FamiliesBFloat16CachedEqualsUncached(t *testing.T) {
	for _, dir := range familyDirs {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			ctx, cfg, err := decoder.Load(filepath.Join(dir, "model"), dtypes.BFloat16)
			if err != nil {
				t.Fatal(err)
			}
			g := generate.NewGenerator(backend.SharedForTests(), ctx, decoder.Arch{Config: cfg})
			t.Cleanup(g.Finalize)
			b, _, err := decoder.ReadBatchJSON(filepath.Join(dir, "inputs", "left_pad.json"))
			if err != nil {
				t.Fatal(err)
			}
			opts := generate.Options{MaxNewTokens: 6, IgnoreEOS: true}
			cached := genIDs(mustGenerate(t, g, true, decoder.PromptsFromBatch(b), opts))
			uncached := genIDs(mustGenerate(t, g, false, decoder.PromptsFromBatch(b), opts))
			if !slices.EqualFunc(cached, uncached, slices.Equal) {
				t.Errorf("bf16: cached %v, uncached %v", cached, uncached)
			}
		})
	}
}
