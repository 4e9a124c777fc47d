package qwen2

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/gomlxfix"
)

// GenerateOptions control Generator.Generate.
type GenerateOptions struct {
	SampleOptions
	// MaxNewTokens is the most tokens generated per row (≥ 1).
	MaxNewTokens int
	// Seed selects the random streams when sampling; row r draws from its own stream of (Seed, r),
	// so the same seed reproduces every row exactly. Vary it between calls (e.g. seed + step).
	Seed uint64
	// StopIDs end a row when generated (the id is kept in Generation.IDs); nil means the
	// config's eos_token_id. Use EOSTokenIDs for the union with generation_config.json.
	StopIDs []int
	// IgnoreEOS generates MaxNewTokens for every row (as the qwen2-tiny fixtures do).
	IgnoreEOS bool
	// Tokenizer, when set, decodes each row's ids into Generation.Text (special tokens skipped).
	Tokenizer TextDecoder
}

// TextDecoder turns ids into text; data/tokenizer's Tokenizer implements it.
type TextDecoder interface {
	Decode(ids []int, skipSpecial bool) string
}

// Generation is one row's output.
type Generation struct {
	IDs  []int32 // generated tokens, the stop token included when one ended the row
	Text string  // IDs decoded without special tokens, when a tokenizer was given
	// LogProbs[i] = log softmax(logits/T)[IDs[i]] over the whole vocabulary, T the temperature
	// (1 when greedy), computed in float64 from the float32 logits: the tempered model
	// distribution the sampler drew from, before top-k/top-p truncation. At T = 1 these are the
	// log-probs Score gives for the same sequence.
	LogProbs []float64
	// Truncated is true when the row reached MaxNewTokens without a stop token.
	Truncated bool
}

// GenerateStats are the measurements of the last Generate call.
type GenerateStats struct {
	Rows, PromptLen, CacheLen int           // batch, prompt and cache buckets
	Prefill, Decode           time.Duration // wall time of the prompt pass and of the decode steps
	DecodeSteps               int           // decode graph executions
	NewTokens                 int           // tokens generated over the real rows
}

// Generator generates continuations of token prompts with a model held in a context. It keeps
// one compiled graph per (batch, prompt, cache) bucket for the prompt pass and one per (batch,
// cache) bucket for the decode step, reused across calls; the weights are read at every call, so
// a trainer may update them between calls. Not safe for concurrent use.
type Generator struct {
	backend backends.Backend
	ctx     *context.Context
	cfg     *Config
	// KVUpdate selects how the cache is written (default KVUpdateAuto); set before the first call.
	KVUpdate KVUpdate

	prefill, decode, full *context.Exec
	decodeHow             KVUpdate // the update the decode graphs were built with
	stats                 GenerateStats
}

// NewGenerator returns a Generator for the model whose weights ctx holds.
func NewGenerator(backend backends.Backend, ctx *context.Context, cfg *Config) *Generator {
	return &Generator{backend: backend, ctx: ctx, cfg: cfg}
}

// Stats returns the measurements of the last Generate or GenerateUncached call.
func (g *Generator) Stats() GenerateStats { return g.stats }

// Finalize frees the compiled graphs.
func (g *Generator) Finalize() {
	for _, e := range []*context.Exec{g.prefill, g.decode, g.full} {
		if e != nil {
			e.Finalize()
		}
	}
	g.prefill, g.decode, g.full = nil, nil, nil
}

// Generate continues each prompt (token ids, unpadded, of any lengths) with the KV cache: the
// prompts are left-padded into one batch, run once, then one decode step per new token.
func (g *Generator) Generate(prompts [][]int32, opts GenerateOptions) ([]Generation, error) {
	return g.run(prompts, opts, &cachedStepper{g: g, how: g.KVUpdate.resolve(g.backend)})
}

// GenerateUncached is Generate recomputing the full forward pass over the whole sequence at each
// step, without a cache: the reference the cached path is tested against (O(steps²) work, one
// graph per length bucket).
func (g *Generator) GenerateUncached(prompts [][]int32, opts GenerateOptions) ([]Generation, error) {
	return g.run(prompts, opts, &fullStepper{g: g})
}

// stepper produces the next-token logits [B·V] (row-major) of a left-padded batch.
type stepper interface {
	start(ids, pos, mask, keyValid [][]int32) ([]float32, error)
	next(tok, pos [][]int32, slot int, keyValid [][]int32) ([]float32, error)
	close()
}

// run is the host loop shared by the cached and uncached paths: pad, sample, stop.
func (g *Generator) run(prompts [][]int32, opts GenerateOptions, st stepper) (_ []Generation, err error) {
	defer st.close()
	if err := g.validate(prompts, opts); err != nil {
		return nil, err
	}
	n, vocab := len(prompts), g.cfg.VocabSize
	rows, plen := bucketRows(n), BucketLen(maxLen(prompts))
	clen := BucketLen(plen + opts.MaxNewTokens)
	ids, mask := leftPad(prompts, rows, plen)
	keyValid := make([][]int32, rows)
	for r := range keyValid {
		keyValid[r] = append(slices.Clone(mask[r]), make([]int32, clen-plen)...)
	}
	g.stats = GenerateStats{Rows: rows, PromptLen: plen, CacheLen: clen}
	t0 := time.Now()
	logits, err := st.start(ids, PositionIDs(mask), mask, keyValid)
	if err != nil {
		return nil, err
	}
	g.stats.Prefill = time.Since(t0)
	t0 = time.Now()
	ds := newDecodeState(n, opts.Seed, stopSet(g.cfg, opts))
	pos := make([][]int32, rows)
	for step := 0; ; step++ {
		tok := ds.step(logits, vocab, opts.SampleOptions, rows)
		if step+1 == opts.MaxNewTokens || ds.finished() {
			break
		}
		slot := plen + step // where this step's token goes
		for r := range rows {
			pos[r] = []int32{int32(countReal(mask[r]) + step)}
			keyValid[r][slot] = 1
		}
		if logits, err = st.next(tok, pos, slot, keyValid); err != nil {
			return nil, err
		}
		g.stats.DecodeSteps++
	}
	g.stats.Decode, g.stats.NewTokens = time.Since(t0), ds.newTokens
	if opts.Tokenizer != nil {
		for r := range ds.gens {
			ds.gens[r].Text = opts.Tokenizer.Decode(toInts(ds.gens[r].IDs), true)
		}
	}
	return ds.gens, nil
}

// decodeState is the host side of a generation: each row's output so far, its random stream and
// whether it has stopped.
type decodeState struct {
	gens      []Generation
	rngs      []*rand.Rand
	done      []bool
	stop      map[int]bool
	next      []int
	nextLP    []float64
	newTokens int
}

func newDecodeState(n int, seed uint64, stop map[int]bool) *decodeState {
	d := &decodeState{gens: make([]Generation, n), rngs: make([]*rand.Rand, n), done: make([]bool, n), stop: stop,
		next: make([]int, n), nextLP: make([]float64, n)}
	for r := range n {
		d.rngs[r] = rowRand(seed, r)
		d.gens[r].Truncated = true
	}
	return d
}

// step samples the next token of every unfinished row from logits [rows·V], records it and
// returns the tokens to feed [rows][1] (0 for finished and padding rows).
func (d *decodeState) step(logits []float32, vocab int, opts SampleOptions, rows int) [][]int32 {
	sampleRows(logits, vocab, d.done, opts, d.rngs, d.next, d.nextLP)
	tok := make([][]int32, rows)
	for r := range rows {
		tok[r] = []int32{0}
		if r >= len(d.done) || d.done[r] {
			continue
		}
		id := d.next[r]
		d.gens[r].IDs, d.gens[r].LogProbs = append(d.gens[r].IDs, int32(id)), append(d.gens[r].LogProbs, d.nextLP[r])
		tok[r][0] = int32(id)
		d.newTokens++
		if d.stop[id] {
			d.done[r], d.gens[r].Truncated = true, false
		}
	}
	return tok
}

func (d *decodeState) finished() bool { return !slices.Contains(d.done, false) }

// sampleRows draws the next token of every unfinished row from logits [rows·V] into ids and lps,
// rows in parallel: each row has its own random stream, so the result does not depend on timing.
func sampleRows(logits []float32, vocab int, done []bool, opts SampleOptions, rngs []*rand.Rand, ids []int, lps []float64) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for r := range done {
		if done[r] {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			ids[r], lps[r] = SampleToken(logits[r*vocab:(r+1)*vocab], opts, rngs[r])
		}()
	}
	wg.Wait()
}

func (g *Generator) validate(prompts [][]int32, opts GenerateOptions) error {
	if len(prompts) == 0 {
		return errors.New("qwen2 generate: no prompts")
	}
	if opts.MaxNewTokens < 1 {
		return fmt.Errorf("qwen2 generate: max new tokens must be at least 1, got %d", opts.MaxNewTokens)
	}
	if opts.TopK < 0 || opts.TopP < 0 {
		return fmt.Errorf("qwen2 generate: top-k (%d) and top-p (%g) must not be negative", opts.TopK, opts.TopP)
	}
	for r, p := range prompts {
		if len(p) == 0 {
			return fmt.Errorf("qwen2 generate: prompt %d is empty", r)
		}
		for _, id := range p {
			if id < 0 || int(id) >= g.cfg.VocabSize {
				return fmt.Errorf("qwen2 generate: prompt %d: token id %d is outside the vocabulary [0, %d)", r, id, g.cfg.VocabSize)
			}
		}
		if m := g.cfg.MaxPositionEmbeddings; m > 0 && len(p)+opts.MaxNewTokens > m {
			return fmt.Errorf("qwen2 generate: prompt %d: %d tokens + %d new exceed max_position_embeddings %d", r, len(p), opts.MaxNewTokens, m)
		}
	}
	return nil
}

// stopSet is the set of ids that end a row.
func stopSet(cfg *Config, opts GenerateOptions) map[int]bool {
	set := map[int]bool{}
	if opts.IgnoreEOS {
		return set
	}
	ids := opts.StopIDs
	if ids == nil {
		ids = cfg.EOSTokenIDs
	}
	for _, id := range ids {
		set[id] = true
	}
	return set
}

// bucketRows is the batch bucket: the next power of two.
func bucketRows(n int) int {
	b := 1
	for b < n {
		b *= 2
	}
	return b
}

// BucketLen is the length bucket of the KV cache and the uncached reference: the next power of
// two from 8 to 256, then multiples of 128.
func BucketLen(n int) int {
	if n > 256 {
		return (n + 127) / 128 * 128
	}
	b := 8
	for b < n {
		b *= 2
	}
	return b
}

func maxLen(rows [][]int32) int {
	m := 0
	for _, r := range rows {
		m = max(m, len(r))
	}
	return m
}

// leftPad lays prompts out as rows×plen ids and mask, left-padded with id 0; rows beyond the
// prompts hold a single token so that every row attends to something.
func leftPad(prompts [][]int32, rows, plen int) (ids, mask [][]int32) {
	ids, mask = make([][]int32, rows), make([][]int32, rows)
	for r := range rows {
		ids[r], mask[r] = make([]int32, plen), make([]int32, plen)
		p := []int32{0}
		if r < len(prompts) {
			p = prompts[r]
		}
		copy(ids[r][plen-len(p):], p)
		for t := plen - len(p); t < plen; t++ {
			mask[r][t] = 1
		}
	}
	return ids, mask
}

func countReal(mask []int32) int {
	n := 0
	for _, m := range mask {
		n += int(m)
	}
	return n
}

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// PromptsFromBatch returns each row's real tokens (mask = 1), dropping the padding on either side.
func PromptsFromBatch(b *Batch) [][]int32 {
	out := make([][]int32, len(b.IDs))
	for r, row := range b.IDs {
		for t, id := range row {
			if b.Mask[r][t] == 1 {
				out[r] = append(out[r], id)
			}
		}
	}
	return out
}

// execute runs exec on args, turning GoMLX panics into errors.
func execute(exec *context.Exec, args ...any) (outs []*tensors.Tensor, err error) {
	err = gomlxfix.Call(func() {
		var e error
		if outs, e = exec.Exec(args...); e != nil {
			panic(e)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("qwen2 generate: %w", err)
	}
	return outs, nil
}

// newExec builds a context.Exec for fn, turning GoMLX panics into errors.
func newExec(b backends.Backend, ctx *context.Context, fn func(*context.Context, []*graph.Node) []*graph.Node) (exec *context.Exec, err error) {
	err = gomlxfix.Call(func() {
		var e error
		if exec, e = context.NewExec(b, ctx, fn); e != nil {
			panic(e)
		}
		exec.SetMaxCache(128)
	})
	if err != nil {
		return nil, fmt.Errorf("qwen2 generate: %w", err)
	}
	return exec, nil
}

// hostLogits copies logits [B,V] to the host and frees the tensor.
func hostLogits(t *tensors.Tensor) ([]float32, error) {
	defer func() { _ = t.FinalizeAll() }()
	return Float32s(t)
}
