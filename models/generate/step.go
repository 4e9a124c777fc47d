package generate

import (
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// cachedStepper runs the prompt pass then single-token decode steps against the KV cache.
type cachedStepper struct {
	g    *Generator
	how  KVUpdate
	mode drawMode
	// caches are the 2·layers [B,L,KV,hd] key and value tensors (keys then values per layer),
	// then, with a repetition penalty, the [B,V] mask of the tokens seen: the previous
	// execution's outputs, owned by the stepper until the next decode step takes them.
	caches []*tensors.Tensor
	numKV  int // how many of caches are keys and values (the rest: the seen mask)
	// keepCaches passes the caches to the decode step as plain tensors, kept alive through the
	// step and freed after it, instead of donating them (the path before donation; tests compare).
	keepCaches bool
}

func (s *cachedStepper) start(ids, pos, mask, keyValid [][]int32, sample []any) ([]int32, []float32, error) {
	g := s.g
	exec, err := g.exec(execKey{graph: "prefill", mode: s.mode}, func(ctx *context.Context, in []*Node) []*Node {
		logits, caches := prefillGraph(ctx, g.model, in[0], in[1], in[2], in[3])
		var seen *Node
		if s.mode.penalty {
			seen = seenTokens(in[0], in[2], g.spec.VocabSize)
			caches = append(caches, seen)
		}
		tok, lp := sampleGraph(logits, in[4:], s.mode, seen)
		return append([]*Node{tok, lp}, caches...)
	})
	if err != nil {
		return nil, nil, err
	}
	args := append([]any{tensors.FromValue(ids), tensors.FromValue(pos), tensors.FromValue(mask), tensors.FromValue(keyValid)}, sample...)
	outs, err := g.execute(exec, args...)
	if err != nil {
		return nil, nil, err
	}
	s.caches = outs[2:]
	s.numKV = len(s.caches)
	if s.mode.penalty {
		s.numKV-- // the seen mask
	}
	return g.hostDraws(outs[0], outs[1])
}

func (s *cachedStepper) next(tok, pos [][]int32, slot int, keyValid [][]int32, sample []any) ([]int32, []float32, error) {
	caches, err := s.cacheArgs()
	if err != nil {
		return nil, nil, err
	}
	return s.decode(caches, tok, pos, slot, keyValid, sample)
}

// decode runs one decode step on caches (the arguments cacheArgs made of s.caches) and keeps the
// step's caches.
func (s *cachedStepper) decode(caches []any, tok, pos [][]int32, slot int, keyValid [][]int32, sample []any) ([]int32, []float32, error) {
	exec, err := s.decodeExec()
	if err != nil {
		return nil, nil, err
	}
	args := []any{tensors.FromValue(tok), tensors.FromValue(pos), tensors.FromScalar(int32(slot)), tensors.FromValue(keyValid)}
	args = append(append(args, caches...), sample...)
	outs, err := s.g.execute(exec, args...)
	if err != nil {
		return nil, nil, err
	}
	s.freeCaches() // the caches not donated
	s.caches = outs[2:]
	return s.g.hostDraws(outs[0], outs[1])
}

// decodeExec is the decode step's Exec: inputs tok [B,1], pos [B,1], slot, keyValid [B,L], the
// caches, then the sampler's parameters; outputs the token, its log-prob and the new caches.
func (s *cachedStepper) decodeExec() (*context.Exec, error) {
	g := s.g
	nKV, nCache := s.numKV, len(s.caches)
	return g.exec(execKey{graph: "decode", mode: s.mode, how: s.how}, func(ctx *context.Context, in []*Node) []*Node {
		logits, caches := decodeGraph(ctx, g.model, in[0], in[1], in[2], in[3], in[4:4+nKV], s.how)
		var seen *Node
		if s.mode.penalty {
			seen = seeToken(in[4+nKV], in[0]) // the token fed in was drawn last step
			caches = append(caches, seen)
		}
		tok, lp := sampleGraph(logits, in[4+nCache:], s.mode, seen)
		return append([]*Node{tok, lp}, caches...)
	})
}

// cacheArgs returns the caches as decode-step arguments, donating their device buffers
// (graph.DonateTensorBuffer): the step replaces every cache, so the backend may reuse or free the
// old buffers as soon as it has read them rather than keep them for the host to free after the
// step. Donation finalizes the tensor, so a donated cache is dropped from s.caches and never freed
// again. What the backends do with a donated buffer (GoMLX v0.26):
//   - pure Go: the executor owns it; the op that reads it last may write its output into it,
//     otherwise it returns to the backend's pool for the step's later ops (the Where update
//     writes into its broadcast operand, so a cache returns to the pool once read).
//   - XLA (PJRT): go-xla destroys donated inputs right after the execution. GoMLX compiles without
//     input/output aliasing, so XLA cannot write the new cache into the old buffer yet; it frees
//     it at the same point as the host did before.
//
// A shared buffer (HasSharedBuffers backends share host tensors they upload) cannot be donated:
// the host still reads its memory. Caches are execution outputs, which GoMLX never shares, but a
// shared one would be passed as a plain tensor and freed after the step, as before.
func (s *cachedStepper) cacheArgs() ([]any, error) {
	args := make([]any, len(s.caches))
	for i, c := range s.caches {
		if s.keepCaches || c.IsShared() {
			args[i] = c
			continue
		}
		var err error
		if args[i], err = DonateTensorBuffer(c, s.g.backend, 0); err != nil {
			return nil, s.g.errorf("donate KV cache %d: %w", i, err)
		}
		s.caches[i] = nil
	}
	return args, nil
}

func (s *cachedStepper) freeCaches() {
	for _, c := range s.caches {
		if c != nil {
			_ = c.FinalizeAll()
		}
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

func (s *fullStepper) start(ids, _, mask, _ [][]int32, sample []any) ([]int32, []float32, error) {
	for r := range ids {
		s.ids, s.mask = append(s.ids, slices.Clone(ids[r])), append(s.mask, slices.Clone(mask[r]))
	}
	return s.forward(sample)
}

func (s *fullStepper) next(tok, _ [][]int32, _ int, _ [][]int32, sample []any) ([]int32, []float32, error) {
	for r := range s.ids {
		s.ids[r] = append(s.ids[r], tok[r][0])
		s.mask[r] = append(s.mask[r], 1)
	}
	return s.forward(sample)
}

func (s *fullStepper) forward(sample []any) ([]int32, []float32, error) {
	g := s.g
	exec, err := g.exec(execKey{graph: "full", mode: s.mode}, func(ctx *context.Context, in []*Node) []*Node {
		var seen *Node
		if s.mode.penalty {
			seen = seenTokens(in[0], in[2], g.spec.VocabSize)
		}
		tok, lp := sampleGraph(g.model.LastLogits(ctx, in[0], in[1], in[2], in[3]), in[4:], s.mode, seen)
		return []*Node{tok, lp}
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
	args := append([]any{tensors.FromValue(ids), tensors.FromValue(positionIDs(mask)), tensors.FromValue(mask), tensors.FromValue(last)}, sample...)
	outs, err := g.execute(exec, args...)
	if err != nil {
		return nil, nil, err
	}
	return g.hostDraws(outs[0], outs[1])
}

func (s *fullStepper) close() {}
