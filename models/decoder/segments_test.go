package decoder

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
)

// logProbs runs fn(ids, pos, m) → [B,S] log-probs on the tiny model.
func logProbs(t *testing.T, ctx *context.Context, fn func(ctx *context.Context, ids, pos, m *Node) *Node, ids, pos, m [][]int32) [][]float32 {
	t.Helper()
	exec, err := context.NewExec(backend.SharedForTests(), ctx, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	outs, err := exec.Exec(tensors.FromValue(ids), tensors.FromValue(pos), tensors.FromValue(m))
	if err != nil {
		t.Fatal(err)
	}
	flat := tensors.MustCopyFlatData[float32](outs[0])
	var rows [][]float32
	for r := range ids {
		rows = append(rows, flat[r*len(ids[0]):(r+1)*len(ids[0])])
	}
	return rows
}

func TestSegmentPositionIDs_RestartPerSequence(t *testing.T) {
	got := SegmentPositionIDs([][]int32{{1, 1, 1, 2, 2, 0, 0}, {1, 1, 3, 3, 3, 3, 0}})
	want := [][]int32{{0, 1, 2, 0, 1, 0, 0}, {0, 1, 0, 1, 2, 3, 0}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("SegmentPositionIDs = %v, want %v", got, want)
	}
}

// A packed row of two sequences (segment ids, positions restarting) gives each token the log-prob
// it has when its sequence runs alone; the same row with one segment and positions 0..L-1
// ("wrapped" packing) lets the second sequence see the first, so it differs.
//
// "Alone" is checked twice. In place: a batch of the packed row twice, each copy's attention mask
// keeping one sequence (right padding for a, left padding for b, positions restarting), so every
// product has the packed row's shapes and the other sequence's keys at the same places; only the
// mechanism differs (segment ids against the attention mask), and the log-probs must be equal bit
// for bit, on every backend. Separately: a right-padded [2,6] batch of the two, within
// separateTol, because a float32 sum depends on the shapes it runs at: XLA's CPU kernels for rows
// of 6 and of 12 keys add in different orders (measured 2026-12-02 with the pinned plugin: b alone
// right-padded from 6 to 12 columns, nothing packed, moves a log-prob by 1.9e-6; packed against
// the [2,6] batch differs by up to 2.9e-6), while the pure-Go backend gives the same bits at both
// lengths.
func TestTokenLogProbsSegments_PackedEqualsSeparate(t *testing.T) {
	const separateTol = 4e-6
	ctx, cfg := loadTiny(t, dtypes.Float32)
	a := []int32{11, 402, 87, 5, 930}
	b := []int32{640, 3, 3, 71, 1000, 256}
	plainFn := func(ctx *context.Context, ids, pos, m *Node) *Node {
		return TokenLogProbs(ctx, cfg, ids, pos, m)
	}
	segFn := func(ctx *context.Context, ids, pos, m *Node) *Node {
		return TokenLogProbsSegments(ctx, cfg, ids, pos, m)
	}
	packed := [][]int32{append(append(slices.Clone(a), b...), 0)} // [1,12], one pad
	seg := [][]int32{{1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0}}
	got := logProbs(t, ctx, segFn, packed, SegmentPositionIDs(seg), seg)[0]

	inPlaceMask := [][]int32{{1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0}}
	inPlace := logProbs(t, ctx, plainFn, [][]int32{packed[0], packed[0]}, PositionIDs(inPlaceMask), inPlaceMask)
	sepIDs := [][]int32{append(slices.Clone(a), 0), b}
	sepMask := [][]int32{{1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 1}}
	sep := logProbs(t, ctx, plainFn, sepIDs, PositionIDs(sepMask), sepMask)
	for _, s := range []struct {
		name        string
		row, offset int // its row in inPlace and sep; its offset in the packed row
		n           int
	}{{"a", 0, 0, len(a)}, {"b", 1, len(a), len(b)}} {
		for i := 1; i < s.n; i++ {
			p := got[s.offset+i]
			if alone := inPlace[s.row][s.offset+i]; p != alone {
				t.Errorf("sequence %s token %d: packed %.7f, alone in place %.7f; want the same bits", s.name, i, p, alone)
			}
			if alone := sep[s.row][i]; math.Abs(float64(p-alone)) > separateTol {
				t.Errorf("sequence %s token %d: packed %.7f, alone %.7f (|Δ| > %g)", s.name, i, p, alone, separateTol)
			}
		}
	}

	wrapSeg := [][]int32{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}}
	wrapped := logProbs(t, ctx, segFn, packed, PositionIDs(wrapSeg), wrapSeg)[0]
	for i := 1; i < len(a); i++ { // a comes first: nothing to see before it, so it is unchanged
		if wrapped[i] != inPlace[0][i] {
			t.Errorf("wrapped: sequence a token %d: %.7f, alone in place %.7f; want the same bits", i, wrapped[i], inPlace[0][i])
		}
	}
	maxDiff := 0.0
	for i := 1; i < len(b); i++ {
		maxDiff = math.Max(maxDiff, math.Abs(float64(wrapped[len(a)+i]-sep[1][i])))
	}
	if maxDiff < 1e-3 {
		t.Errorf("wrapped: sequence b's log-probs differ from alone by only %g; attention across the boundary should change them", maxDiff)
	}
}
