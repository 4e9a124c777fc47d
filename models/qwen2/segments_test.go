package qwen2

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// logProbs runs fn(ids, pos, m) → [B,S] log-probs on the tiny model.
func logProbs(t *testing.T, ctx *context.Context, fn func(ctx *context.Context, ids, pos, m *Node) *Node, ids, pos, m [][]int32) [][]float32 {
	t.Helper()
	exec, err := context.NewExec(testBackendOrSkip(t), ctx, fn)
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
// it has when its sequence runs alone, to float32 round-off; the same row with one segment and
// positions 0..L-1 ("wrapped" packing) lets the second sequence see the first, so it differs.
func TestTokenLogProbsSegments_PackedEqualsSeparate(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	a := []int32{11, 402, 87, 5, 930}
	b := []int32{640, 3, 3, 71, 1000, 256}
	// Separately: a right-padded batch of the two sequences.
	sepIDs := [][]int32{append(slices.Clone(a), 0), b}
	sepMask := [][]int32{{1, 1, 1, 1, 1, 0}, {1, 1, 1, 1, 1, 1}}
	sep := logProbs(t, ctx, func(ctx *context.Context, ids, pos, m *Node) *Node {
		return TokenLogProbs(ctx, cfg, ids, pos, m)
	}, sepIDs, PositionIDs(sepMask), sepMask)

	packed := [][]int32{append(append(slices.Clone(a), b...), 0)} // [1,12], one pad
	seg := [][]int32{{1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 0}}
	segFn := func(ctx *context.Context, ids, pos, m *Node) *Node {
		return TokenLogProbsSegments(ctx, cfg, ids, pos, m)
	}
	got := logProbs(t, ctx, segFn, packed, SegmentPositionIDs(seg), seg)[0]
	for i := 1; i < len(a); i++ {
		if d := math.Abs(float64(got[i] - sep[0][i])); d > 2e-6 {
			t.Errorf("sequence a token %d: packed %.7f, alone %.7f", i, got[i], sep[0][i])
		}
	}
	for i := 1; i < len(b); i++ {
		if d := math.Abs(float64(got[len(a)+i] - sep[1][i])); d > 2e-6 {
			t.Errorf("sequence b token %d: packed %.7f, alone %.7f", i, got[len(a)+i], sep[1][i])
		}
	}

	wrapSeg := [][]int32{{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0}}
	wrapped := logProbs(t, ctx, segFn, packed, PositionIDs(wrapSeg), wrapSeg)[0]
	for i := 1; i < len(a); i++ { // a comes first: nothing to see before it, so it is unchanged
		if d := math.Abs(float64(wrapped[i] - sep[0][i])); d > 2e-6 {
			t.Errorf("wrapped: sequence a token %d: %.7f, alone %.7f", i, wrapped[i], sep[0][i])
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
