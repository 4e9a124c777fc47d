package bench

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// DecodeRun is one batch size of the decode workload.
type DecodeRun struct {
	Batch     int     `json:"batch"`
	Rows      int     `json:"rows"` // compiled batch bucket
	PromptLen int     `json:"prompt_len"`
	NewTokens int     `json:"new_tokens"`
	CacheLen  int     `json:"cache_len"`
	WarmupS   float64 `json:"warmup_s"` // first call of these shapes: compilation included
	// TimedCompiles are the graphs compiled during the timed generation: 0 unless it recompiles.
	TimedCompiles int     `json:"timed_compiles"`
	PrefillS      float64 `json:"prefill_s"`
	DecodeS       float64 `json:"decode_s"`
	TotalS        float64 `json:"total_s"`
	Tokens        int     `json:"tokens"`
	// TokensPerS counts every generated token over prefill + decode; DecodeTokensPerS the tokens
	// of the decode steps (all but the first of each row) over the decode time.
	TokensPerS       float64 `json:"tokens_per_s"`
	DecodeTokensPerS float64 `json:"decode_tokens_per_s"`
}

// DecodeResult is the decode workload's output.
type DecodeResult struct {
	Info
	Runs []DecodeRun `json:"runs"`
}

// DecodeParams are the decode workload's settings.
type DecodeParams struct {
	Batches              []int // batch sizes, one run each
	PromptLen, NewTokens int   // per row; EOS is ignored
	Seed                 uint64
}

// WarmupNewTokens is the fewest new tokens (≥ 2: one prefill and one decode step) whose cache
// bucket on backend b is that of newTok: a warm-up that compiles the timed shapes in the least time.
func WarmupNewTokens(b backends.Backend, plen, newTok int) int {
	want := generate.BucketLen(generate.PromptBucket(b, plen) + newTok)
	for n := 2; n < newTok; n++ {
		if generate.BucketLen(generate.PromptBucket(b, plen)+n) == want {
			return n
		}
	}
	return newTok
}

// Decode times batched greedy decoding with the KV cache (the generator the trainers sample with),
// each batch size after a warm-up on its shapes.
func Decode(env *Env, p DecodeParams) (*DecodeResult, error) {
	rng := rand.New(rand.NewPCG(p.Seed, 0xdec0de))
	gen := generate.NewGenerator(env.Backend, env.Ctx, decoder.Arch{Config: env.Config})
	defer gen.Finalize()
	res := &DecodeResult{Info: env.Info}
	for _, bs := range p.Batches {
		prompts := randomIDs(rng, env.Config, bs, p.PromptLen)
		opts := generate.Options{MaxNewTokens: WarmupNewTokens(env.Backend, p.PromptLen, p.NewTokens), IgnoreEOS: true, Seed: p.Seed}
		t0 := time.Now()
		if _, err := gen.Generate(prompts, opts); err != nil {
			return nil, fmt.Errorf("batch %d warm-up: %w", bs, err)
		}
		warm := time.Since(t0)
		opts.MaxNewTokens = p.NewTokens
		c0 := backend.Compiled()
		t0 = time.Now()
		gens, err := gen.Generate(prompts, opts)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", bs, err)
		}
		total := time.Since(t0)
		st := gen.Stats()
		run := DecodeRun{Batch: bs, Rows: st.Rows, PromptLen: p.PromptLen, NewTokens: p.NewTokens, CacheLen: st.CacheLen,
			WarmupS: warm.Seconds(), TimedCompiles: backend.Compiled().Graphs - c0.Graphs, PrefillS: st.Prefill.Seconds(), DecodeS: st.Decode.Seconds(), TotalS: total.Seconds()}
		for _, g := range gens {
			run.Tokens += len(g.IDs)
		}
		run.TokensPerS = float64(run.Tokens) / total.Seconds()
		if st.Decode > 0 {
			run.DecodeTokensPerS = float64(run.Tokens-len(gens)) / st.Decode.Seconds()
		}
		env.logf("decode batch %d: %d tokens in %.2fs (%.0f tokens/s; warm-up %.1fs)", bs, run.Tokens, run.TotalS, run.TokensPerS, run.WarmupS)
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}
