package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/models/qwen2"
)

// ---- bench sample ----

// The sampler draws from hash noise that is a pure function of (seed, row, step, token), so the
// same checkpoint generates the same tokens on every backend, up to logit rounding: bench sample
// runs the KV-cache generator with every sampler variant on --backend and on a reference backend
// (the pure-Go one) and compares the tokens. On XLA it checks the in-graph draw (hash, Gumbel-max,
// the top-k/top-p histogram search) and the DynamicUpdateSlice cache writes at once.

func benchSampleCommand() *cli.Command {
	return &cli.Command{
		Name:  "sample",
		Usage: "generate with every sampler variant on --backend and on the pure-Go backend, and compare the tokens",
		Flags: append(benchModelFlags("float32"),
			&cli.StringFlag{Name: "reference-backend", Value: backend.Default, Usage: "backend the tokens are compared with"},
			&cli.IntFlag{Name: "rows", Value: 4, Usage: "prompts (≥ 1)"},
			&cli.IntFlag{Name: "prompt-len", Value: 8, Usage: "tokens per prompt (≥ 1)"},
			&cli.IntFlag{Name: "new-tokens", Value: 16, Usage: "tokens generated per row (≥ 1; EOS ignored)"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			rows, plen, newTok := cmd.Int("rows"), cmd.Int("prompt-len"), cmd.Int("new-tokens")
			if rows < 1 || plen < 1 || newTok < 1 {
				return usageError{fmt.Errorf("%s: need --rows, --prompt-len and --new-tokens ≥ 1", cmd.FullName())}
			}
			env, err := loadBenchModel(ctx, cmd, "sample")
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			defer env.backend.Finalize()
			refName := backend.Resolve(cmd.String("reference-backend"))
			ref, err := backend.New(refName)
			if err != nil {
				return fmt.Errorf("%s: --reference-backend: %w", cmd.FullName(), err)
			}
			defer ref.Finalize()
			refCtx, _, err := qwen2.Load(env.dir, env.dtype)
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			res := &benchSampleResult{benchInfo: env.info, Reference: refName}
			prompts := benchRandomIDs(rand.New(rand.NewPCG(cmd.Uint64("seed"), 0x5a3b1e)), env.cfg, rows, plen)
			got, want := generate.NewGenerator(env.backend, env.ctx, qwen2.Arch{Config: env.cfg}), generate.NewGenerator(ref, refCtx, qwen2.Arch{Config: env.cfg})
			defer got.Finalize()
			defer want.Finalize()
			for _, c := range benchSampleCases {
				opts := generate.Options{SampleOptions: c.opts, MaxNewTokens: newTok, IgnoreEOS: true, Seed: cmd.Uint64("seed")}
				a, err := got.Generate(prompts, opts)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", cmd.FullName(), c.name, err)
				}
				b, err := want.Generate(prompts, opts)
				if err != nil {
					return fmt.Errorf("%s: %s on %s: %w", cmd.FullName(), c.name, refName, err)
				}
				res.add(c.name, a, b)
			}
			res.Strict = res.MaxLogProbDiff <= benchSampleStrictLP
			benchLog(cmd, "sample: %d of %d tokens equal to %s's, max |Δ log-prob| %.3g", res.TokensEqual, res.Tokens, refName, res.MaxLogProbDiff)
			if err := writeBenchJSON(cmd.Root().Writer, res); err != nil {
				return err
			}
			return res.verdict(cmd.FullName())
		},
	}
}

// benchSampleCases cover the sampler's graph code: greedy, temperature, top-k with top-p (both
// cut-off searches), min-p, repetition penalty (with top-p). Each is compiled on the backend, so
// they are few: the GPU check's time is short.
var benchSampleCases = []struct {
	name string
	opts generate.SampleOptions
}{
	{"greedy", generate.SampleOptions{}},
	{"temperature_1", generate.SampleOptions{Temperature: 1}},
	{"top_k_50_top_p_0.95_t1.3", generate.SampleOptions{Temperature: 1.3, TopK: 50, TopP: 0.95}},
	{"min_p_0.1", generate.SampleOptions{Temperature: 1, MinP: 0.1}},
	{"repetition_1.3_top_p_0.9", generate.SampleOptions{Temperature: 1, TopP: 0.9, RepetitionPenalty: 1.3}},
}

type benchSampleCase struct {
	Name        string  `json:"name"`
	Tokens      int     `json:"tokens"`
	TokensEqual int     `json:"tokens_equal"` // positions equal up to each row's first difference
	RowsEqual   int     `json:"rows_equal"`
	MaxLPDiff   float64 `json:"max_logprob_diff"` // over the equal positions
	Rows        int     `json:"rows"`
}

// A draw can only differ between backends where two perturbed scores are closer than the logits'
// difference. With float32 logits that agree to rounding (log-probs within benchSampleStrictLP)
// such near-ties do not happen in a few hundred tokens, so every token must agree. When the
// backend's logits differ more (TF32 matrix products on a GPU: ~1e-3), a few near-ties can flip
// and send a row down another path; then at least benchSampleLooseShare of the tokens must agree,
// which a broken sampler or KV cache (unrelated tokens) cannot reach. The logits themselves are
// checked by the score stages.
const (
	benchSampleStrictLP   = 1e-5
	benchSampleLooseShare = 0.9
)

type benchSampleResult struct {
	benchInfo
	Reference      string            `json:"reference_backend"`
	Strict         bool              `json:"strict"` // logits agree to float32 rounding: every token must agree
	Cases          []benchSampleCase `json:"cases"`
	Tokens         int               `json:"tokens"`
	TokensEqual    int               `json:"tokens_equal"`
	MaxLogProbDiff float64           `json:"max_logprob_diff"`
	FirstDiff      string            `json:"first_difference,omitempty"`
}

// add compares one case's generations a (the backend) and b (the reference), row by row up to
// the first different token (after it the rows continue from different prefixes).
func (r *benchSampleResult) add(name string, a, b []generate.Generation) {
	c := benchSampleCase{Name: name, Rows: len(a)}
	for i := range a {
		c.Tokens += len(b[i].IDs)
		n := 0
		for n < min(len(a[i].IDs), len(b[i].IDs)) && a[i].IDs[n] == b[i].IDs[n] {
			c.MaxLPDiff = max(c.MaxLPDiff, math.Abs(a[i].LogProbs[n]-b[i].LogProbs[n]))
			n++
		}
		c.TokensEqual += n
		if slices.Equal(a[i].IDs, b[i].IDs) {
			c.RowsEqual++
		} else if r.FirstDiff == "" {
			r.FirstDiff = fmt.Sprintf("%s row %d token %d: %v vs %v", name, i, n, a[i].IDs, b[i].IDs)
		}
	}
	r.Cases = append(r.Cases, c)
	r.Tokens, r.TokensEqual = r.Tokens+c.Tokens, r.TokensEqual+c.TokensEqual
	r.MaxLogProbDiff = max(r.MaxLogProbDiff, c.MaxLPDiff)
}

// verdict is the command's error: any difference in strict mode, else too few equal tokens.
func (r *benchSampleResult) verdict(name string) error {
	if r.TokensEqual == r.Tokens {
		return nil
	}
	if !r.Strict && float64(r.TokensEqual) >= benchSampleLooseShare*float64(r.Tokens) {
		return nil
	}
	return fmt.Errorf("%s: %d of %d tokens differ from %s's with max |Δ log-prob| %.3g (first: %s)",
		name, r.Tokens-r.TokensEqual, r.Tokens, r.Reference, r.MaxLogProbDiff, r.FirstDiff)
}
