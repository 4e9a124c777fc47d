package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// The sampler draws from hash noise that is a pure function of (seed, row, step, token), so the
// same checkpoint generates the same tokens on every backend, up to logit rounding: Sample runs
// the KV-cache generator with every sampler variant on the environment's backend and on a
// reference backend (the pure-Go one) and compares the tokens. On XLA it checks the in-graph draw
// (hash, Gumbel-max, the top-k/top-p histogram search) and the DynamicUpdateSlice cache writes at
// once.

// sampleCases cover the sampler's graph code: greedy, temperature, top-k with top-p (both cut-off
// searches), min-p, repetition penalty (with top-p). Each is compiled on the backend, so they are
// few: the GPU check's time is short.
var sampleCases = []struct {
	name string
	opts generate.SampleOptions
}{
	{"greedy", generate.SampleOptions{}},
	{"temperature_1", generate.SampleOptions{Temperature: 1}},
	{"top_k_50_top_p_0.95_t1.3", generate.SampleOptions{Temperature: 1.3, TopK: 50, TopP: 0.95}},
	{"min_p_0.1", generate.SampleOptions{Temperature: 1, MinP: 0.1}},
	{"repetition_1.3_top_p_0.9", generate.SampleOptions{Temperature: 1, TopP: 0.9, RepetitionPenalty: 1.3}},
}

// SampleCase is one sampler variant's comparison.
type SampleCase struct {
	Name        string  `json:"name"`
	Tokens      int     `json:"tokens"`
	TokensEqual int     `json:"tokens_equal"` // positions equal up to each row's first difference
	RowsEqual   int     `json:"rows_equal"`
	MaxLPDiff   float64 `json:"max_logprob_diff"` // over the equal positions
	Rows        int     `json:"rows"`
}

// A draw can only differ between backends where two perturbed scores are closer than the logits'
// difference. With float32 logits that agree to rounding (log-probs within SampleStrictLP) such
// near-ties do not happen in a few hundred tokens, so every token must agree. When the backend's
// logits differ more (TF32 matrix products on a GPU: ~1e-3), a few near-ties can flip and send a
// row down another path; then at least SampleLooseShare of the tokens must agree, which a broken
// sampler or KV cache (unrelated tokens) cannot reach. The logits themselves are checked by the
// score stages.
const (
	SampleStrictLP   = 1e-5
	SampleLooseShare = 0.9
)

// SampleResult is the sample workload's output.
type SampleResult struct {
	Info
	Reference      string       `json:"reference_backend"`
	Strict         bool         `json:"strict"` // logits agree to float32 rounding: every token must agree
	Cases          []SampleCase `json:"cases"`
	Tokens         int          `json:"tokens"`
	TokensEqual    int          `json:"tokens_equal"`
	MaxLogProbDiff float64      `json:"max_logprob_diff"`
	FirstDiff      string       `json:"first_difference,omitempty"`
}

// SampleParams are the sample workload's settings.
type SampleParams struct {
	Reference     backends.Backend // the backend the tokens are compared with
	ReferenceName string           // its configuration
	Rows          int
	PromptLen     int
	NewTokens     int // per row; EOS ignored
	Seed          uint64
}

// Sample generates with every sampler variant on env's backend and on p.Reference (the same
// checkpoint loaded again there) and compares the tokens; Verdict says whether they agree as the
// logits require.
func Sample(env *Env, p SampleParams) (*SampleResult, error) {
	ref, refName := p.Reference, p.ReferenceName
	refCtx, _, err := decoder.Load(env.Dir, env.DType)
	if err != nil {
		return nil, err
	}
	res := &SampleResult{Info: env.Info, Reference: refName}
	prompts := randomIDs(rand.New(rand.NewPCG(p.Seed, 0x5a3b1e)), env.Config, p.Rows, p.PromptLen)
	got, want := generate.NewGenerator(env.Backend, env.Ctx, decoder.Arch{Config: env.Config}), generate.NewGenerator(ref, refCtx, decoder.Arch{Config: env.Config})
	defer got.Finalize()
	defer want.Finalize()
	for _, c := range sampleCases {
		opts := generate.Options{SampleOptions: c.opts, MaxNewTokens: p.NewTokens, IgnoreEOS: true, Seed: p.Seed}
		a, err := got.Generate(prompts, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		b, err := want.Generate(prompts, opts)
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", c.name, refName, err)
		}
		res.add(c.name, a, b)
	}
	res.Strict = res.MaxLogProbDiff <= SampleStrictLP
	env.logf("sample: %d of %d tokens equal to %s's, max |Δ log-prob| %.3g", res.TokensEqual, res.Tokens, refName, res.MaxLogProbDiff)
	return res, nil
}

// add compares one case's generations a (the backend) and b (the reference), row by row up to
// the first different token (after it the rows continue from different prefixes).
func (r *SampleResult) add(name string, a, b []generate.Generation) {
	c := SampleCase{Name: name, Rows: len(a)}
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

// Verdict is nil when the tokens agree as the logits require: all of them in strict mode, else at
// least SampleLooseShare.
func (r *SampleResult) Verdict() error {
	if r.TokensEqual == r.Tokens {
		return nil
	}
	if !r.Strict && float64(r.TokensEqual) >= SampleLooseShare*float64(r.Tokens) {
		return nil
	}
	return fmt.Errorf("%d of %d tokens differ from %s's with max |Δ log-prob| %.3g (first: %s)",
		r.Tokens-r.TokensEqual, r.Tokens, r.Reference, r.MaxLogProbDiff, r.FirstDiff)
}
