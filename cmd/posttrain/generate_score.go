package main

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// scoreGeneration is `posttrain score --gen N`'s "generation" section, in the layout of the
// qwen2-tiny expected files: greedy tokens without EOS stopping, with and without the KV cache.
type scoreGeneration struct {
	MaxNewTokens    int         `json:"max_new_tokens"`
	TokensCache     [][]int32   `json:"tokens_cache"`
	TokensNoCache   [][]int32   `json:"tokens_nocache"`
	Agree           bool        `json:"agree"`
	LogProbsCache   [][]float64 `json:"logprobs_cache"`
	LogProbsNoCache [][]float64 `json:"logprobs_nocache"`
}

// generateForScore continues each row's real tokens (padding dropped) by n greedy tokens.
func generateForScore(b backends.Backend, ctx *context.Context, cfg *decoder.Config, batch *decoder.Batch, n int) (*scoreGeneration, error) {
	g := generate.NewGenerator(b, ctx, decoder.Arch{Config: cfg})
	defer g.Finalize()
	prompts := decoder.PromptsFromBatch(batch)
	opts := generate.Options{MaxNewTokens: n, IgnoreEOS: true}
	cached, err := g.Generate(prompts, opts)
	if err != nil {
		return nil, err
	}
	uncached, err := g.GenerateUncached(prompts, opts)
	if err != nil {
		return nil, err
	}
	out := &scoreGeneration{MaxNewTokens: n, Agree: true}
	for r := range cached {
		out.TokensCache = append(out.TokensCache, cached[r].IDs)
		out.TokensNoCache = append(out.TokensNoCache, uncached[r].IDs)
		out.LogProbsCache = append(out.LogProbsCache, cached[r].LogProbs)
		out.LogProbsNoCache = append(out.LogProbsNoCache, uncached[r].LogProbs)
		out.Agree = out.Agree && slices.Equal(cached[r].IDs, uncached[r].IDs)
	}
	return out, nil
}
