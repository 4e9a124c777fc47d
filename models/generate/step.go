package generate

import (
	"slices"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/shard"
)

// The graphs' inputs and outputs (internal/named: T is any for the host's inputs, []*tensors.Tensor
// for the outputs the host gets back — one piece per device, a single tensor on one — and *Node in
// the graph).
type (
	// prefillInputs are the prompt pass's: the left-padded prompts' ids, positions and attention
	// mask [B,P], the keys valid in the cache [B,L] and the sampler's parameters.
	prefillInputs[T any] struct {
		IDs, Pos, Mask, KeyValid T
		Sample                   sampleInputs[T]
	}
	// decodeInputs are a decode step's: the tokens fed [B,1], each row's first real cache slot
	// [B] (its left padding's length), the cache slot the tokens go to (int32 scalar), the state
	// the last step returned and the sampler's parameters. The positions and the key mask are
	// computed on the device from Start and Slot (decodeMask), so that no [B,L] tensor is built
	// and uploaded by the host at every step.
	decodeInputs[T any] struct {
		Tok, Start, Slot T
		State            state[T]
		Sample           sampleInputs[T]
	}
	// state is what a step hands to the next: the 2·layers KV caches [B,KV,L,hd] (keys then values
	// per layer) and, with a repetition penalty, the [B,V] mask of the tokens seen (else none).
	state[T any] struct{ Caches, Seen []T }
	// stepOutputs are the prompt pass's and a decode step's: the drawn tokens [B], their
	// log-probs [B] and the state.
	stepOutputs[T any] struct {
		Tok, LogProb T
		State        state[T]
	}
	// growInputs are the state a "grow" graph pads, and its output.
	growInputs[T any] struct{ State state[T] }
	// fullInputs are the uncached reference's: ids, positions and mask [B,S] of the whole
	// sequence right-padded to a bucket, each row's last real position [B] and the sampler's
	// parameters.
	fullInputs[T any] struct {
		IDs, Pos, Mask, Last T
		Sample               sampleInputs[T]
	}
	// drawOutputs are the uncached reference's: the drawn tokens and their log-probs [B].
	drawOutputs[T any] struct{ Tok, LogProb T }
)

// cachedStepper runs the prompt pass then single-token decode steps against the KV cache.
type cachedStepper struct {
	g    *Generator
	how  KVUpdate
	mode drawMode
	// caches are the state of the previous execution (its outputs), flat: State.Caches then
	// State.Seen, each as its pieces (one per device), owned by the stepper until the next decode
	// step takes them.
	caches [][]*tensors.Tensor
	numKV  int // how many of caches are State.Caches (the rest: State.Seen)
	// firstSlot is each row's first real slot (the prompt's left padding), fixed for the generation.
	firstSlot []int32
	// cacheLen is the caches' length L; maxCache the longest they may grow to (the bucket of the
	// prompt and every new token).
	cacheLen, maxCache int
	// keepCaches passes the caches to the decode step as plain tensors, kept alive through the
	// step and freed after it, instead of donating them (the path before donation; tests compare).
	keepCaches bool
}

// prepareWeights lets a model that keeps product copies of its weights (WeightPreparer) make or
// refresh them for a batch of rows, before the cached path's prompt pass and the uncached one's
// first step alike, so that both multiply by the same weights.
func (g *Generator) prepareWeights(rows int) error {
	if p, ok := g.model.(WeightPreparer); ok {
		if err := p.PrepareWeights(g.ctx, g.backend, rows); err != nil {
			return g.errorf("%w", err)
		}
	}
	return nil
}

func (s *cachedStepper) start(ids, pos, mask, keyValid [][]int32, maxCache int, sample sampleInputs[any]) ([]int32, []float32, error) {
	g := s.g
	if err := g.prepareWeights(len(ids)); err != nil {
		return nil, nil, err
	}
	exec, err := g.exec(execKey{graph: "prefill", mode: s.mode}, func(ctx *context.Context, nodes named.Inputs) named.List[*Node] {
		in := named.Bind[prefillInputs[*Node]](nodes)
		var out stepOutputs[*Node]
		logits, caches := prefillGraph(ctx, g.model, in.IDs, in.Pos, in.Mask, in.KeyValid)
		out.State.Caches = caches
		var seen *Node
		if s.mode.penalty {
			seen = seenTokens(in.IDs, in.Mask, g.spec.VocabSize)
			out.State.Seen = []*Node{seen}
		}
		out.Tok, out.LogProb = sampleGraph(logits, in.Sample, s.mode, seen)
		return named.Of[*Node](out)
	})
	if err != nil {
		return nil, nil, err
	}
	s.cacheLen, s.maxCache = len(keyValid[0]), maxCache
	s.firstSlot = make([]int32, len(mask))
	for r := range mask {
		s.firstSlot[r] = int32(len(mask[r]) - countReal(mask[r]))
	}
	in := prefillInputs[any]{IDs: tensors.FromValue(ids), Pos: tensors.FromValue(pos), Mask: tensors.FromValue(mask),
		KeyValid: tensors.FromValue(keyValid), Sample: sample}
	res, err := g.execute(exec, named.Of[any](in))
	if err != nil {
		return nil, nil, err
	}
	out := named.Bind[stepOutputs[[]*tensors.Tensor]](res)
	s.caches = append(out.State.Caches, out.State.Seen...)
	s.numKV = len(out.State.Caches)
	return g.hostDraws(out.Tok, out.LogProb)
}

// steps makes room in the caches for want steps from slot (the last writes slot+want-1): the
// cache grows a few steps earlier than one step at a time would make it.
func (s *cachedStepper) steps(slot, want int) (int, error) {
	return want, s.room(slot + want - 1)
}

func (s *cachedStepper) next(tok []int32, slot, n int, sample sampleInputs[any]) ([]int32, []float32, error) {
	caches, err := s.cacheArgs()
	if err != nil {
		return nil, nil, err
	}
	return s.decode(caches, tok, slot, n, sample)
}

// room grows the caches when slot lies past their end (CacheLens).
func (s *cachedStepper) room(slot int) error {
	if slot < s.cacheLen {
		return nil
	}
	return s.grow(nextCacheLen(s.cacheLen, slot, s.maxCache))
}

// nextCacheLen is the length a cache of l slots grows to when slot lies past its end: twice l
// (along BucketLen's buckets), at most maxCache.
func nextCacheLen(l, slot, maxCache int) int {
	return min(maxCache, max(BucketLen(2*l), BucketLen(slot+1)))
}

// CacheLens are the lengths the KV cache of a generation takes, in order, for a prompt bucket of
// plen and newTokens new tokens: one bucket past the prompt, then doubling as the rows reach its
// end (nextCacheLen), up to BucketLen(plen + newTokens). Its last is Stats.CacheLen of a
// generation that runs to newTokens.
func CacheLens(plen, newTokens int) []int {
	final := BucketLen(plen + newTokens)
	lens := []int{min(final, BucketLen(plen+1))}
	last := plen + newTokens - 2 // decode step k (k = 0…newTokens-2) writes slot plen+k
	for l := lens[0]; l <= last && l < final; {
		l = nextCacheLen(l, l, final) // slot l is the first past the cache's end
		lens = append(lens, l)
	}
	return lens
}

// grow pads the caches with empty slots to length l (a graph per length; the old caches are
// donated), so that the decode steps attend to a cache about as long as the rows, doubling as
// they reach its end, rather than to the whole bucket of max_new_tokens from the first step.
func (s *cachedStepper) grow(l int) error {
	if l <= s.cacheLen {
		return s.g.errorf("KV cache of %d slots cannot grow to %d", s.cacheLen, l)
	}
	exec, err := s.g.exec(execKey{graph: "grow", mode: s.mode, size: l}, func(_ *context.Context, nodes named.Inputs) named.List[*Node] {
		in := named.Bind[growInputs[*Node]](nodes)
		out := state[*Node]{Seen: in.State.Seen}
		for _, c := range in.State.Caches { // [B,KV,L,hd] → [B,KV,l,hd]
			dims := c.Shape().Dimensions
			zeros := Zeros(c.Graph(), shapes.Make(c.DType(), dims[0], dims[1], l-dims[2], dims[3]))
			out.Caches = append(out.Caches, Concatenate([]*Node{c, zeros}, 2))
		}
		return named.Of[*Node](growInputs[*Node]{State: out})
	})
	if err != nil {
		return err
	}
	caches, err := s.cacheArgs()
	if err != nil {
		return err
	}
	t0 := time.Now()
	res, err := s.g.execute(exec, named.Of[any](growInputs[any]{State: state[any]{Caches: caches[:s.numKV], Seen: caches[s.numKV:]}}))
	s.g.stats.DecodeExec += time.Since(t0)
	if err != nil {
		return err
	}
	out := named.Bind[growInputs[[]*tensors.Tensor]](res)
	s.freeCaches() // the caches not donated
	s.caches = append(out.State.Caches, out.State.Seen...)
	s.cacheLen = l
	s.g.stats.CacheLen, s.g.stats.DecodeMemory = l, nil
	s.g.stats.CacheGrowths++
	return nil
}

// decode runs n decode steps on caches (the arguments cacheArgs made of s.caches, flat as
// s.caches) and keeps the last step's state. Its host inputs are flat: the tokens [B,1], the
// rows' first slots [B] and the first step's slot. It returns the steps' draws step-major.
func (s *cachedStepper) decode(caches []any, tok []int32, slot, n int, sample sampleInputs[any]) ([]int32, []float32, error) {
	exec, err := s.decodeExec(n)
	if err != nil {
		return nil, nil, err
	}
	in := decodeInputs[any]{Tok: tensors.FromFlatDataAndDimensions(tok, len(tok), 1),
		Start: tensors.FromFlatDataAndDimensions(s.firstSlot, len(s.firstSlot)), Slot: tensors.FromScalar(int32(slot)),
		State: state[any]{Caches: caches[:s.numKV], Seen: caches[s.numKV:]}, Sample: sample}
	t0 := time.Now()
	res, err := s.g.execute(exec, named.Of[any](in))
	s.g.stats.DecodeExec += time.Since(t0)
	if err != nil {
		return nil, nil, err
	}
	if s.g.stats.DecodeMemory == nil {
		s.g.stats.DecodeMemory = exec.memory()
	}
	if s.g.CostAnalysis {
		if b := exec.stepBytesAccessed(); b > 0 {
			s.g.stats.DecodeBytesAccessed += b
			s.g.stats.DecodeCostSteps++
		}
	}
	out := named.Bind[stepOutputs[[]*tensors.Tensor]](res)
	s.freeCaches() // the caches not donated
	s.caches = append(out.State.Caches, out.State.Seen...)
	ids, lps, err := s.g.hostDraws(out.Tok, out.LogProb)
	if err != nil || n == 1 {
		return ids, lps, err
	}
	return stepMajor(ids, n), stepMajor(lps, n), nil
}

// stepMajor reorders draws [B,n] (row-major) into [n,B].
func stepMajor[T any](x []T, n int) []T {
	rows := len(x) / n
	out := make([]T, len(x))
	for r := range rows {
		for i := range n {
			out[i*rows+r] = x[r*n+i]
		}
	}
	return out
}

// decodeExec is the graph of n decode steps (Options.StepsPerCall), unrolled: decodeInputs →
// stepOutputs, the draws [B] (one step) or [B,n] and the last step's state. Step i writes slot
// Slot+i and feeds the token step i-1 drew; each draws with its own keys (Sample.Keys [B,n]).
func (s *cachedStepper) decodeExec(n int) (*compiled, error) {
	g := s.g
	return g.exec(execKey{graph: "decode", mode: s.mode, how: s.how, steps: n}, func(ctx *context.Context, nodes named.Inputs) named.List[*Node] {
		in := named.Bind[decodeInputs[*Node]](nodes)
		var out stepOutputs[*Node]
		tok, caches := in.Tok, in.State.Caches
		b := tok.Shape().Dim(0)
		var seen *Node
		if s.mode.penalty {
			seen = in.State.Seen[0]
		}
		var toks, lps []*Node
		for i := range n {
			slot := in.Slot
			if i > 0 {
				slot = Add(in.Slot, Const(in.Slot.Graph(), int32(i)))
			}
			pos, keyValid := decodeMask(in.Start, slot, caches[0].Shape().Dim(2))
			var logits *Node
			logits, caches = decodeGraph(ctx, g.model, tok, pos, slot, keyValid, caches, s.how)
			if s.mode.penalty {
				seen = seeToken(seen, tok) // the token fed in was drawn the step before
			}
			sample := in.Sample
			if n > 1 {
				sample.Keys = Reshape(Slice(in.Sample.Keys, AxisRange(), AxisElem(i)), b)
			}
			t, lp := sampleGraph(logits, sample, s.mode, seen)
			toks, lps = append(toks, t), append(lps, lp)
			tok = Reshape(t, b, 1)
		}
		out.State.Caches = caches
		if s.mode.penalty {
			out.State.Seen = []*Node{seen}
		}
		out.Tok, out.LogProb = toks[0], lps[0]
		if n > 1 {
			out.Tok, out.LogProb = Stack(toks, 1), Stack(lps, 1)
		}
		return named.Of[*Node](out)
	})
}

// decodeMask returns a decode step's positions [B,1] and key mask [B,L] (int32, 1 where a slot
// holds a real token) from the rows' first real slots start [B] and the step's slot (scalar):
// row b's slots start[b]..slot hold its left-padded prompt's real tokens and the tokens generated
// so far, slot being this step's, so its position is slot - start[b] (the real tokens before it).
func decodeMask(start, slot *Node, l int) (pos, keyValid *Node) {
	b := start.Shape().Dim(0)
	start = Reshape(start, b, 1)
	slots := Iota(start.Graph(), shapes.Make(dtypes.Int32, b, l), 1)
	keyValid = ConvertDType(LogicalAnd(GreaterOrEqual(slots, start), LessOrEqual(slots, slot)), dtypes.Int32)
	return Sub(slot, start), keyValid
}

// cacheArgs returns the caches as decode-step arguments, donating their device buffers
// (graph.DonateTensorBuffer): the step replaces every cache, so the backend may reuse or free the
// old buffers as soon as it has read them rather than keep them for the host to free after the
// step. Donation finalizes the tensor, so a donated cache is dropped from s.caches and never freed
// again. What the backends do with a donated buffer (GoMLX v0.26):
//   - pure Go: the executor owns it; the op that reads it last may write its output into it,
//     otherwise it returns to the backend's pool for the step's later ops (the Where update
//     writes into its broadcast operand, so a cache returns to the pool once read).
//   - XLA (PJRT): each new cache is aliased to its old one (aliasState), so XLA writes the step's
//     one new slot into the donated buffer in place; a cache not donated is copied first.
//
// A shared buffer (HasSharedBuffers backends share host tensors they upload) cannot be donated:
// the host still reads its memory. Caches are execution outputs, which GoMLX never shares, but a
// shared one would be passed as a plain tensor and freed after the step, as before.
//
// On several devices (SplitRows) each cache is its pieces, each donated on its own device.
func (s *cachedStepper) cacheArgs() ([]any, error) {
	args := make([]any, len(s.caches))
	rows := s.g.rows
	for i, c := range s.caches {
		if s.keepCaches || slices.ContainsFunc(c, (*tensors.Tensor).IsShared) {
			args[i] = c[0]
			if rows != nil {
				args[i] = shard.Keep(c)
			}
			continue
		}
		var err error
		if rows != nil {
			args[i], err = rows.Donate(c)
		} else {
			args[i], err = DonateTensorBuffer(c[0], s.g.backend, 0)
		}
		if err != nil {
			return nil, s.g.errorf("donate KV cache %d: %w", i, err)
		}
		s.caches[i] = nil
	}
	return args, nil
}

func (s *cachedStepper) freeCaches() {
	for _, c := range s.caches {
		shard.Free(c)
	}
	s.caches = nil
}

func (s *cachedStepper) close() { s.freeCaches() }

// fullStepper recomputes the whole sequence at every step (no cache): the left-padded prompt and
// the tokens so far, right-padded to a length bucket so that graphs are compiled per bucket.
type fullStepper struct {
	g         *Generator
	mode      drawMode
	ids, mask [][]int32
}

func (s *fullStepper) start(ids, _, mask, _ [][]int32, _ int, sample sampleInputs[any]) ([]int32, []float32, error) {
	if err := s.g.prepareWeights(len(ids)); err != nil {
		return nil, nil, err
	}
	for r := range ids {
		s.ids, s.mask = append(s.ids, slices.Clone(ids[r])), append(s.mask, slices.Clone(mask[r]))
	}
	return s.forward(sample)
}

// steps is one: the uncached reference draws one token per forward pass.
func (s *fullStepper) steps(int, int) (int, error) { return 1, nil }

func (s *fullStepper) next(tok []int32, _, _ int, sample sampleInputs[any]) ([]int32, []float32, error) {
	for r := range s.ids {
		s.ids[r] = append(s.ids[r], tok[r])
		s.mask[r] = append(s.mask[r], 1)
	}
	return s.forward(sample)
}

func (s *fullStepper) forward(sample sampleInputs[any]) ([]int32, []float32, error) {
	g := s.g
	exec, err := g.exec(execKey{graph: "full", mode: s.mode}, func(ctx *context.Context, nodes named.Inputs) named.List[*Node] {
		in := named.Bind[fullInputs[*Node]](nodes)
		var seen *Node
		if s.mode.penalty {
			seen = seenTokens(in.IDs, in.Mask, g.spec.VocabSize)
		}
		var out drawOutputs[*Node]
		out.Tok, out.LogProb = sampleGraph(g.model.LastLogits(ctx, in.IDs, in.Pos, in.Mask, in.Last), in.Sample, s.mode, seen)
		return named.Of[*Node](out)
	})
	if err != nil {
		return nil, nil, err
	}
	n := len(s.ids[0])
	padded := BucketLen(n)
	ids, mask, last := make([][]int32, len(s.ids)), make([][]int32, len(s.ids)), make([]int32, len(s.ids))
	for r := range s.ids {
		ids[r] = append(slices.Clone(s.ids[r]), make([]int32, padded-n)...)
		mask[r] = append(slices.Clone(s.mask[r]), make([]int32, padded-n)...)
		last[r] = int32(n - 1)
	}
	in := fullInputs[any]{IDs: tensors.FromValue(ids), Pos: tensors.FromValue(PositionIDs(mask)), Mask: tensors.FromValue(mask),
		Last: tensors.FromValue(last), Sample: sample}
	res, err := g.execute(exec, named.Of[any](in))
	if err != nil {
		return nil, nil, err
	}
	out := named.Bind[drawOutputs[[]*tensors.Tensor]](res)
	return g.hostDraws(out.Tok, out.LogProb)
}

func (s *fullStepper) close() {}
