package qwen2

import (
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// cachedStepper runs the prompt pass then single-token decode steps against the KV cache.
type cachedStepper struct {
	g      *Generator
	how    KVUpdate
	caches []*tensors.Tensor // 2·layers [B,L,KV,hd], keys then values per layer
}

func (s *cachedStepper) start(ids, pos, mask, keyValid [][]int32) ([]float32, error) {
	g := s.g
	if g.prefill == nil {
		exec, err := newExec(g.backend, g.ctx, func(ctx *context.Context, in []*Node) []*Node {
			return prefillGraph(ctx, g.cfg, in[0], in[1], in[2], in[3])
		})
		if err != nil {
			return nil, err
		}
		g.prefill = exec
	}
	outs, err := execute(g.prefill, tensors.FromValue(ids), tensors.FromValue(pos), tensors.FromValue(mask), tensors.FromValue(keyValid))
	if err != nil {
		return nil, err
	}
	s.caches = outs[1:]
	return hostLogits(outs[0])
}

func (s *cachedStepper) next(tok, pos [][]int32, slot int, keyValid [][]int32) ([]float32, error) {
	g := s.g
	if g.decode == nil || g.decodeHow != s.how {
		if g.decode != nil {
			g.decode.Finalize()
		}
		how := s.how
		exec, err := newExec(g.backend, g.ctx, func(ctx *context.Context, in []*Node) []*Node {
			return decodeGraph(ctx, g.cfg, in[0], in[1], in[2], in[3], in[4:], how)
		})
		if err != nil {
			return nil, err
		}
		g.decode, g.decodeHow = exec, how
	}
	args := []any{tensors.FromValue(tok), tensors.FromValue(pos), tensors.FromScalar(int32(slot)), tensors.FromValue(keyValid)}
	for _, c := range s.caches {
		args = append(args, c)
	}
	outs, err := execute(g.decode, args...)
	if err != nil {
		return nil, err
	}
	s.freeCaches()
	s.caches = outs[1:]
	return hostLogits(outs[0])
}

func (s *cachedStepper) freeCaches() {
	for _, c := range s.caches {
		_ = c.FinalizeAll()
	}
	s.caches = nil
}

func (s *cachedStepper) close() { s.freeCaches() }

// fullStepper recomputes the whole sequence at every step (no cache): the left-padded prompt and
// the tokens so far, right-padded to a length bucket so that graphs are compiled per bucket.
type fullStepper struct {
	g         *Generator
	ids, mask [][]int32
}

func (s *fullStepper) start(ids, _, mask, _ [][]int32) ([]float32, error) {
	for r := range ids {
		s.ids, s.mask = append(s.ids, slices.Clone(ids[r])), append(s.mask, slices.Clone(mask[r]))
	}
	return s.forward()
}

func (s *fullStepper) next(tok, _ [][]int32, _ int, _ [][]int32) ([]float32, error) {
	for r := range s.ids {
		s.ids[r] = append(s.ids[r], tok[r][0])
		s.mask[r] = append(s.mask[r], 1)
	}
	return s.forward()
}

func (s *fullStepper) forward() ([]float32, error) {
	g := s.g
	if g.full == nil {
		exec, err := newExec(g.backend, g.ctx, func(ctx *context.Context, in []*Node) []*Node {
			return []*Node{lastLogitsGraph(ctx, g.cfg, in[0], in[1], in[2], in[3])}
		})
		if err != nil {
			return nil, err
		}
		g.full = exec
	}
	n := len(s.ids[0])
	padded := BucketLen(n)
	ids, mask, last := make([][]int32, len(s.ids)), make([][]int32, len(s.ids)), make([]int32, len(s.ids))
	for r := range s.ids {
		ids[r] = append(slices.Clone(s.ids[r]), make([]int32, padded-n)...)
		mask[r] = append(slices.Clone(s.mask[r]), make([]int32, padded-n)...)
		last[r] = int32(n - 1)
	}
	outs, err := execute(g.full, tensors.FromValue(ids), tensors.FromValue(PositionIDs(mask)), tensors.FromValue(mask), tensors.FromValue(last))
	if err != nil {
		return nil, err
	}
	return hostLogits(outs[0])
}

func (s *fullStepper) close() {}
