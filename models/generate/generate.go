// Package generate generates text with any decoder family: the Generator (prompt pass and
// single-token decode steps against a KV cache, or the uncached reference), the cache layout and
// how a step writes it (KVUpdate), the in-graph sampler (temperature, top-k, top-p, min-p,
// repetition penalty; SampleOptions), the batch and length buckets (BucketLen), left padding,
// position ids and stop handling. A family plugs in by implementing Model (prefill, decode with
// the cache, the uncached last logits, and its Spec); decoder.Arch is the Qwen2 one. Adding a family
// changes nothing here. The compiled graphs take and return their tensors by name
// (internal/named): each step's inputs and outputs are structs (step.go, sample.go).
package generate

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/gomlxfix"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/shard"
)

// Options control Generator.Generate.
type Options struct {
	SampleOptions
	// MaxNewTokens is the most tokens generated per row (≥ 1).
	MaxNewTokens int
	// Seed selects the random streams when sampling; row r draws from its own stream of (Seed, r),
	// so the same seed reproduces every row exactly, on every backend. Vary it between calls
	// (e.g. seed + step).
	Seed uint64
	// StopIDs end a row when generated (the id is kept in Generation.IDs); nil means the
	// model's Spec.EOSTokenIDs (config.json's eos_token_id). decoder.EOSTokenIDs gives the union
	// with generation_config.json.
	StopIDs []int
	// IgnoreEOS generates MaxNewTokens for every row (as the qwen2-tiny fixtures do).
	IgnoreEOS bool
	// Tokenizer, when set, decodes each row's ids into Generation.Text (special tokens skipped).
	Tokenizer TextDecoder
	// StepsPerCall is how many decode steps one execution of the decode graph runs (the steps
	// unrolled in one executable), so that the host reads the drawn tokens, checks the rows for
	// stop tokens and starts the next execution once per StepsPerCall tokens rather than once per
	// token; 0 or 1 is one step per execution. The tokens and log-probs are those of single steps:
	// a row's draws depend only on its own logits and keys (sampleKey), and a row that stops
	// within a call has its later tokens discarded. Near the end of a generation (fewer than
	// StepsPerCall tokens left) the steps run one at a time, so that one multi-step graph serves.
	StepsPerCall int
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
	// (1 when greedy), computed in float32 in the sampling graph: the tempered model distribution
	// the sampler drew from, before top-k/top-p truncation. At T = 1 these are the log-probs scoring
	// gives for the same sequence (decoder.Score).
	LogProbs []float64
	// Truncated is true when the row reached MaxNewTokens without a stop token.
	Truncated bool
}

// Stats are the measurements of the last Generate call.
type Stats struct {
	// Rows and PromptLen are the batch and prompt buckets; CacheLen the cache length the
	// generation ended with (the cache starts one bucket past the prompt and doubles, along
	// BucketLen's buckets, whenever the rows reach its end: a step attends to about the live
	// length, not to max_new_tokens' whole bucket), and CacheGrowths how often it grew.
	Rows, PromptLen, CacheLen int
	CacheGrowths              int
	Prefill, Decode           time.Duration // wall time of the prompt pass and of the decode steps
	DecodeSteps               int           // decode steps (tokens drawn per row after the prompt pass's)
	DecodeCalls               int           // decode graph executions (DecodeSteps / Options.StepsPerCall, about)
	NewTokens                 int           // tokens generated over the real rows
	// DecodeMemory is XLA's memory plan of the decode step (its buffer assignment: arguments,
	// outputs, the part of the outputs written in place into donated arguments, temporaries); nil
	// on the pure-Go backend and on several devices.
	DecodeMemory *backends.CompiledMemoryStats
	// DecodeBytesAccessed is the sum over the decode steps of XLA's cost analysis of each step's
	// graph ("bytes accessed": what the compiled step reads and writes in memory, by XLA's
	// estimate), over DecodeCostSteps steps; 0 where the backend reports none.
	DecodeBytesAccessed float64
	DecodeCostSteps     int
	// DecodeExec is the part of Decode spent in the decode steps' executions (inputs uploaded, the
	// graph run, its outputs returned); the rest is the host's work between them.
	DecodeExec time.Duration
	// DecodeStepTimes are the decode steps' wall times, in order (the host's work included; the
	// steps of one multi-step execution each get an equal share of its time).
	DecodeStepTimes []time.Duration
}

// Generator generates continuations of token prompts with a Model whose weights a context holds.
// It keeps one compiled graph per (batch, prompt, cache) bucket for the prompt pass and one per
// (batch, cache) bucket for the decode step, reused across calls; the weights are read at every
// call, so a trainer may update them between calls. Not safe for concurrent use.
type Generator struct {
	backend backends.Backend
	ctx     *context.Context
	model   Model
	// KVUpdate selects how the cache is written (default KVUpdateAuto); set before the first call.
	KVUpdate KVUpdate
	// CostAnalysis asks XLA for each decode graph's cost analysis (Stats.DecodeBytesAccessed), once
	// per graph: for measurements (posttrain bench decode), off otherwise.
	CostAnalysis bool

	execs map[execKey]*compiled
	stats Stats
	spec  Spec        // the model's Spec, read at the start of each call
	rows  *shard.Rows // several devices (SplitRows), nil on one
}

// SplitRows runs the Generator's graphs over the devices of rows (internal/shard): every row
// input — the prompts, the positions and masks, the sampler's keys, the KV caches — split along
// the batch over the devices, the weights read as the context's variables hold them (replicated
// by the training driver), the drawn tokens gathered on the host. The KV caches stay on their
// devices between decode steps, one piece per device. The batch bucket is rounded up to a
// multiple of the devices. Each row's key depends only on (seed, row, step), so a row draws the
// same tokens on any number of devices, up to the float32 round-off of its logits. nil runs on
// one device (the default); the compiled graphs are dropped when the split changes.
func (g *Generator) SplitRows(rows *shard.Rows) {
	if rows != g.rows {
		g.Finalize()
	}
	g.rows = rows
}

// Devices is the number of devices the rows are split over (SplitRows): 1 on one.
func (g *Generator) Devices() int {
	if g.rows == nil {
		return 1
	}
	return g.rows.N()
}

// bucketRows is the batch bucket of n prompts: the next power of two, a multiple of the devices.
func (g *Generator) bucketRows(n int) int {
	b := bucketRows(n)
	if g.rows != nil {
		d := g.rows.N()
		b = (b + d - 1) / d * d
	}
	return b
}

// execKey names one of the Generator's compiled graphs: the prompt pass, the decode step or the
// uncached reference, by sampler variant and (decode step) cache update.
type execKey struct {
	graph string
	mode  drawMode
	how   KVUpdate
	size  int // the cache length a "grow" graph pads to
	steps int // the decode steps a "decode" graph runs
}

// compiled is one of the Generator's graphs with the names of its inputs and outputs.
type compiled struct {
	exec *context.Exec
	sig  named.Signature
	last *graph.Graph // the graph of the last execution on one device (its memory plan)
	// bytesAccessed is XLA's cost analysis of last: its "bytes accessed"; -1 where there is none
	// (another backend, several devices); read once (costKnown).
	bytesAccessed float64
	costKnown     bool
}

// stepBytesAccessed is XLA's estimate of the bytes c's graph reads and writes in one execution
// (its cost analysis, "bytes accessed"), or -1 where the backend reports none.
func (c *compiled) stepBytesAccessed() float64 {
	if !c.costKnown && c.last != nil {
		c.bytesAccessed, c.costKnown = -1, true
		if cost, err := c.last.CostAnalysis(); err == nil {
			if v, ok := cost["bytes accessed"]; ok {
				c.bytesAccessed = v
			}
		}
	}
	if !c.costKnown {
		return -1
	}
	return c.bytesAccessed
}

// memory is XLA's memory plan of c's last execution, or nil (another backend, several devices).
func (c *compiled) memory() *backends.CompiledMemoryStats {
	if c.last == nil {
		return nil
	}
	m, err := c.last.CompiledMemoryStats()
	if err != nil {
		return nil
	}
	return &m
}

// graphFn builds a graph from its named inputs and returns its outputs by name.
type graphFn func(*context.Context, named.Inputs) named.List[*graph.Node]

// exec returns the graph of key, building it with fn the first time.
func (g *Generator) exec(key execKey, fn graphFn) (*compiled, error) {
	if e := g.execs[key]; e != nil {
		return e, nil
	}
	e, err := g.newExec(fn)
	if err != nil {
		return nil, err
	}
	if g.execs == nil {
		g.execs = map[execKey]*compiled{}
	}
	g.execs[key] = e
	return e, nil
}

// NewGenerator returns a Generator for model, whose weights ctx holds.
func NewGenerator(backend backends.Backend, ctx *context.Context, model Model) *Generator {
	return &Generator{backend: backend, ctx: ctx, model: model}
}

// Stats returns the measurements of the last Generate or GenerateUncached call.
func (g *Generator) Stats() Stats { return g.stats }

// Finalize frees the compiled graphs.
func (g *Generator) Finalize() {
	for _, e := range g.execs {
		e.exec.Finalize()
	}
	g.execs = nil
}

// Generate continues each prompt (token ids, unpadded, of any lengths) with the KV cache: the
// prompts are left-padded into one batch, run once, then one decode step per new token.
func (g *Generator) Generate(prompts [][]int32, opts Options) ([]Generation, error) {
	g.spec = g.model.Spec()
	return g.run(prompts, opts, &cachedStepper{g: g, how: g.KVUpdate.resolve(g.backend), mode: opts.mode(g.spec.VocabSize)})
}

// GenerateUncached is Generate recomputing the full forward pass over the whole sequence at each
// step, without a cache: the reference the cached path is tested against (O(steps²) work, one
// graph per length bucket).
func (g *Generator) GenerateUncached(prompts [][]int32, opts Options) ([]Generation, error) {
	g.spec = g.model.Spec()
	return g.run(prompts, opts, &fullStepper{g: g, mode: opts.mode(g.spec.VocabSize)})
}

// stepper draws the next token of every row of a left-padded batch, with the sampler's runtime
// inputs (sampleParams), and returns the tokens [B] and their log-probs [B].
type stepper interface {
	// start runs the prompt pass; keyValid [B,L] sizes the cache, which may grow to maxCache.
	start(ids, pos, mask, keyValid [][]int32, maxCache int, sample sampleInputs[any]) ([]int32, []float32, error)
	// steps returns how many decode steps, want or fewer, the next call of next runs from slot,
	// making room for them in the cache.
	steps(slot, want int) (int, error)
	// next feeds tok [B] into slot and runs n decode steps; it returns their tokens and log-probs
	// step-major ([n·B]).
	next(tok []int32, slot, n int, sample sampleInputs[any]) ([]int32, []float32, error)
	close()
}

// run is the host loop shared by the cached and uncached paths: pad, sample, stop. g.spec is the
// model's Spec of this call.
func (g *Generator) run(prompts [][]int32, opts Options, st stepper) (_ []Generation, err error) {
	defer st.close()
	if err := g.validate(prompts, opts); err != nil {
		return nil, err
	}
	n := len(prompts)
	rows, plen := g.bucketRows(n), PromptBucket(g.backend, maxLen(prompts))
	final := BucketLen(plen + opts.MaxNewTokens)
	clen := CacheLens(plen, opts.MaxNewTokens)[0] // the cache grows as the rows do (cachedStepper.grow)
	ids, mask := leftPad(prompts, rows, plen)
	keyValid := make([][]int32, rows)
	for r := range keyValid {
		keyValid[r] = append(slices.Clone(mask[r]), make([]int32, clen-plen)...)
	}
	g.stats = Stats{Rows: rows, PromptLen: plen, CacheLen: clen}
	t0 := time.Now()
	sampleSteps := func(step, n int) sampleInputs[any] {
		return sampleParams(opts.SampleOptions, opts.Seed, step, n, rows, g.spec.VocabSize)
	}
	drawn, lps, err := st.start(ids, PositionIDs(mask), mask, keyValid, final, sampleSteps(0, 1))
	if err != nil {
		return nil, err
	}
	g.stats.Prefill = time.Since(t0)
	t0 = time.Now()
	ds := newDecodeState(n, stopSet(g.spec, opts))
	k := max(1, opts.StepsPerCall)
	tCall := t0
	// drawn and lps hold the last execution's draws, step-major ([m·rows]); step is the index of
	// their first token among the row's new tokens.
	for step := 0; ; {
		var tok []int32
		m := len(drawn) / rows
		for i := range m {
			if tok, err = ds.step(drawn[i*rows:(i+1)*rows], lps[i*rows:(i+1)*rows], rows, step+i); err != nil {
				return nil, g.errorf("%w", err)
			}
			if step+i+1 == opts.MaxNewTokens || ds.finished() {
				g.stats.Decode, g.stats.NewTokens = time.Since(t0), ds.newTokens
				return g.finish(ds, opts), nil
			}
		}
		step += m - 1 // the token fed next, drawn last
		slot := plen + step
		want := k
		if opts.MaxNewTokens-1-step < k {
			want = 1
		}
		steps, err := st.steps(slot, want)
		if err != nil {
			return nil, err
		}
		if drawn, lps, err = st.next(tok, slot, steps, sampleSteps(step+1, steps)); err != nil {
			return nil, err
		}
		g.stats.DecodeCalls++
		g.stats.DecodeSteps += steps
		now := time.Now()
		for range steps {
			g.stats.DecodeStepTimes = append(g.stats.DecodeStepTimes, now.Sub(tCall)/time.Duration(steps))
		}
		tCall = now
		step++
	}
}

// finish returns the generations of ds, their texts decoded when opts has a tokenizer.
func (g *Generator) finish(ds *decodeState, opts Options) []Generation {
	if opts.Tokenizer != nil {
		for r := range ds.gens {
			ds.gens[r].Text = opts.Tokenizer.Decode(toInts(ds.gens[r].IDs), true)
		}
	}
	return ds.gens
}

// decodeState is the host side of a generation: each row's output so far and whether it has
// stopped.
type decodeState struct {
	gens      []Generation
	done      []bool
	stop      map[int]bool
	newTokens int
}

func newDecodeState(n int, stop map[int]bool) *decodeState {
	d := &decodeState{gens: make([]Generation, n), done: make([]bool, n), stop: stop}
	for r := range n {
		d.gens[r].Truncated = true
	}
	return d
}

// step records the drawn tokens [rows] and log-probs of every unfinished row and returns the
// tokens to feed [rows] (0 for finished and padding rows). A non-finite log-prob is an error
// naming the row, the new token's index and its id: the model's logits were NaN or infinite, and
// a token drawn from them means nothing (it printed an empty line and exited 0).
func (d *decodeState) step(drawn []int32, lps []float32, rows, step int) ([]int32, error) {
	tok := make([]int32, rows)
	for r := range rows {
		if r >= len(d.done) || d.done[r] {
			continue
		}
		id := drawn[r]
		if lp := float64(lps[r]); math.IsNaN(lp) || math.IsInf(lp, 0) {
			return nil, fmt.Errorf("prompt %d, new token %d (id %d): log-prob %g: the model's logits are not finite", r, step, id, lp)
		}
		d.gens[r].IDs, d.gens[r].LogProbs = append(d.gens[r].IDs, id), append(d.gens[r].LogProbs, float64(lps[r]))
		tok[r] = id
		d.newTokens++
		if d.stop[int(id)] {
			d.done[r], d.gens[r].Truncated = true, false
		}
	}
	return tok, nil
}

func (d *decodeState) finished() bool { return !slices.Contains(d.done, false) }

// errorf is an error of this generator: "qwen2 generate: …" for the qwen2 family.
func (g *Generator) errorf(format string, args ...any) error {
	prefix := "generate: "
	if g.spec.Family != "" {
		prefix = g.spec.Family + " " + prefix
	}
	return fmt.Errorf(prefix+format, args...)
}

// MaxLen bounds prompt + new tokens when the model has no max_position_embeddings (Spec
// MaxPositions 0): the KV cache and the masks are sized by it.
const MaxLen = 1 << 24

func (g *Generator) validate(prompts [][]int32, opts Options) error {
	if len(prompts) == 0 {
		return g.errorf("no prompts")
	}
	if opts.MaxNewTokens < 1 {
		return g.errorf("max new tokens must be at least 1, got %d", opts.MaxNewTokens)
	}
	if math.IsNaN(opts.Temperature) || math.IsInf(opts.Temperature, 0) || opts.Temperature < 0 {
		return g.errorf("temperature must be a finite number ≥ 0 (0 = greedy), got %g", opts.Temperature)
	}
	if opts.TopK < 0 || opts.TopP < 0 || math.IsNaN(opts.TopP) {
		return g.errorf("top-k (%d) and top-p (%g) must not be negative", opts.TopK, opts.TopP)
	}
	if opts.MinP < 0 || opts.MinP > 1 || math.IsNaN(opts.MinP) {
		return g.errorf("min-p must be in [0, 1], got %g", opts.MinP)
	}
	if opts.RepetitionPenalty < 0 || math.IsInf(opts.RepetitionPenalty, 0) || math.IsNaN(opts.RepetitionPenalty) {
		return g.errorf("repetition penalty must be ≥ 0 (1 = off), got %g", opts.RepetitionPenalty)
	}
	for r, p := range prompts {
		if len(p) == 0 {
			return g.errorf("prompt %d is empty", r)
		}
		for _, id := range p {
			if id < 0 || int(id) >= g.spec.VocabSize {
				return g.errorf("prompt %d: token id %d is outside the vocabulary [0, %d)", r, id, g.spec.VocabSize)
			}
		}
		// Compared by subtraction: len(p) + MaxNewTokens overflows for a count near the int limit.
		if m := g.spec.MaxPositions; m > 0 && opts.MaxNewTokens > m-len(p) {
			return g.errorf("prompt %d: %d tokens + %d new exceed max_position_embeddings %d", r, len(p), opts.MaxNewTokens, m)
		}
		if opts.MaxNewTokens > MaxLen-len(p) {
			return g.errorf("prompt %d: %d tokens + %d new exceed %d, the longest sequence generated", r, len(p), opts.MaxNewTokens, MaxLen)
		}
	}
	return nil
}

// stopSet is the set of ids that end a row.
func stopSet(spec Spec, opts Options) map[int]bool {
	set := map[int]bool{}
	if opts.IgnoreEOS {
		return set
	}
	ids := opts.StopIDs
	if ids == nil {
		ids = spec.EOSTokenIDs
	}
	for _, id := range ids {
		set[id] = true
	}
	return set
}

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// execute runs c on in and returns its outputs by name, each as its pieces (one per device: a
// single tensor on one device), turning GoMLX panics into errors.
func (g *Generator) execute(c *compiled, in named.Feed) (outs named.List[[]*tensors.Tensor], err error) {
	err = gomlxfix.Call(func() {
		args, e := c.sig.Args(in)
		if e != nil {
			panic(e)
		}
		var pieces [][]*tensors.Tensor
		if g.rows != nil {
			pieces, e = g.rows.Exec(c.exec, args)
		} else {
			var ts []*tensors.Tensor
			ts, c.last, e = c.exec.ExecWithGraph(args...)
			for _, t := range ts {
				pieces = append(pieces, []*tensors.Tensor{t})
			}
		}
		if e != nil {
			panic(e)
		}
		if outs, e = named.ResultsOf(&c.sig, pieces); e != nil {
			panic(e)
		}
	})
	if err != nil {
		return outs, g.errorf("%w", err)
	}
	return outs, nil
}

// newExec builds a context.Exec for fn, turning GoMLX panics into errors.
func (g *Generator) newExec(fn graphFn) (c *compiled, err error) {
	c = &compiled{}
	err = gomlxfix.Call(func() {
		var e error
		c.exec, e = context.NewExec(g.backend, g.ctx, func(ctx *context.Context, nodes []*graph.Node) []*graph.Node {
			in := c.sig.Inputs(nodes)
			out := fn(ctx, in)
			aliasState(ctx, in, out)
			return c.sig.Outputs(out)
		})
		if e != nil {
			panic(e)
		}
		// One graph per (rows, prompt, cache) bucket: long completions make many cache buckets
		// (multiples of 128 past 256), so no limit (GoMLX's default fails past 32 shapes).
		c.exec.SetMaxCache(-1)
	})
	if err != nil {
		return nil, g.errorf("%w", err)
	}
	return c, nil
}

// aliasState marks each output named as an input (the decode step's "State.Caches[k]" and
// "State.Seen[0]": the step's new KV cache and seen-token counts) as that input's new value, so
// that XLA writes it into the input's donated buffer (graph.AliasOutputToParameter, the
// third_party aliasing patch): the cache is updated in place instead of copied whole every step.
// context.Exec puts the variables a graph changes before its outputs, so output k of fn is
// output k+changed of the compiled program.
func aliasState(ctx *context.Context, in named.Inputs, out named.List[*graph.Node]) {
	if len(out.Values) == 0 {
		return
	}
	g := out.Values[0].Graph()
	changed := 0
	for v := range ctx.IterVariables() {
		if v.ChangedInGraph(g) {
			changed++
		}
	}
	for k, name := range out.Names {
		if !strings.HasPrefix(name, "State.") {
			continue
		}
		if i := slices.Index(in.Names, name); i >= 0 && in.Values[i].Type() == graph.NodeTypeParameter {
			g.AliasOutputToParameter(changed+k, in.Values[i])
		}
	}
}

// hostDraws copies the drawn tokens [B] and their log-probs [B] (their pieces, one per device)
// to the host and frees them.
func (g *Generator) hostDraws(tokPieces, lpPieces []*tensors.Tensor) ([]int32, []float32, error) {
	defer func() { shard.Free(tokPieces); shard.Free(lpPieces) }()
	var ids []int32
	var lps []float32
	err := gomlxfix.Call(func() {
		tok, lp := tokPieces[0], lpPieces[0]
		if g.rows != nil {
			var e1, e2 error
			tok, e1 = g.rows.Merge(tokPieces)
			lp, e2 = g.rows.Merge(lpPieces)
			if e := errors.Join(e1, e2); e != nil {
				panic(e)
			}
			defer func() { _ = tok.FinalizeAll(); _ = lp.FinalizeAll() }()
		}
		ids, lps = tensors.MustCopyFlatData[int32](tok), tensors.MustCopyFlatData[float32](lp)
	})
	if err != nil {
		return nil, nil, g.errorf("%w", err)
	}
	return ids, lps, nil
}
