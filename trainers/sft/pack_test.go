package sft

import (
	"slices"
	"testing"
)

// BFD's bins worked by hand, including TRL's two docstring examples (trl/data_utils.py
// pack_dataset: lengths 3, 2, 3, 1 into 4 → [[0 3] [2] [1]]; lengths 5→4 (cut), 2, 3, 1 → [[0]
// [2 3] [1]]).
func TestBFD_HandChecked(t *testing.T) {
	cases := []struct {
		lengths  []int
		capacity int
		want     [][]int
	}{
		{[]int{3, 2, 3, 1}, 4, [][]int{{0, 3}, {2}, {1}}},
		{[]int{4, 2, 3, 1}, 4, [][]int{{0}, {2, 3}, {1}}},
		// Sorted 6(#1) 5(#3) 4(#0) 3(#4) 2(#2) 2(#5): 6 → bin0 (space 4); 5 → bin1 (5); 4 → the
		// best fit is bin0 (space 4 → 0); 3 → bin1 (5 → 2); 2 → bin1 (2 → 0); 2 → bin2 (new).
		{[]int{4, 6, 2, 5, 3, 2}, 10, [][]int{{1, 0}, {3, 4, 2}, {5}}},
		// Ties keep index order; among bins with the same space left the oldest is filled first:
		// 3(#0) → bin0 (2 left), 3(#1) → bin1 (2 left), 2(#2) → bin0, 2(#3) → bin1.
		{[]int{3, 3, 2, 2}, 5, [][]int{{0, 2}, {1, 3}}},
		{[]int{1}, 1, [][]int{{0}}},
	}
	for _, c := range cases {
		if got := BFD(c.lengths, c.capacity); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("BFD(%v, %d) = %v, want %v", c.lengths, c.capacity, got, c.want)
		}
	}
}

// ex builds a tokenized example as New leaves it: scored[0] cleared, first keeps its mask.
func ex(ids []int32, scored ...bool) example {
	e := example{ids: ids, scored: slices.Clone(scored), first: scored[0]}
	e.scored[0] = false
	for _, s := range e.scored {
		if s {
			e.units++
		}
	}
	return e
}

// bfd rows keep each example whole as a segment whose first token is not scored; wrapped rows
// cut the stream every max_length tokens, score an example's first token after another one
// (its mask as tokenized) and never a row's first token.
func TestPack_SegmentsAndScoring(t *testing.T) {
	examples := []example{
		ex([]int32{1, 2, 3}, true, true, true),  // a text row: every token has loss
		ex([]int32{4, 5}, false, true),          // prompt 4, completion 5
		ex([]int32{6, 7, 8}, true, false, true), // a middle token masked
	}
	bfd := packBFD(examples, 5)
	want := []example{
		{ids: []int32{1, 2, 3, 4, 5}, seg: []int32{1, 1, 1, 2, 2}, scored: []bool{false, true, true, false, true}, units: 3},
		{ids: []int32{6, 7, 8}, seg: []int32{1, 1, 1}, scored: []bool{false, false, true}, units: 1},
	}
	check := func(name string, got, want []example) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", name, len(got), len(want))
		}
		for i := range want {
			g, w := got[i], want[i]
			if !slices.Equal(g.ids, w.ids) || !slices.Equal(g.seg, w.seg) || !slices.Equal(g.scored, w.scored) || g.units != w.units {
				t.Errorf("%s row %d: ids %v seg %v scored %v units %d, want %v %v %v %d", name, i, g.ids, g.seg, g.scored, g.units, w.ids, w.seg, w.scored, w.units)
			}
		}
	}
	check("bfd", bfd, want)

	wrapped := packWrapped(examples, 3)
	check("wrapped", wrapped, []example{
		{ids: []int32{1, 2, 3}, seg: []int32{1, 1, 1}, scored: []bool{false, true, true}, units: 2},
		{ids: []int32{4, 5, 6}, seg: []int32{1, 1, 1}, scored: []bool{false, true, true}, units: 2}, // 6 follows 5
		{ids: []int32{7, 8}, seg: []int32{1, 1}, scored: []bool{false, true}, units: 1},
	})
	for _, e := range examples { // packing leaves the examples as they were
		if e.scored[0] {
			t.Errorf("example %v: scored[0] changed", e.ids)
		}
	}
}

// Rows never mix examples of two datasets.map blocks of mapBatch examples.
func TestPack_PerMapBlock(t *testing.T) {
	var examples []example
	for range mapBatch + 1 {
		examples = append(examples, ex([]int32{9}, true))
	}
	if got := packBFD(examples, mapBatch); len(got) != 2 || len(got[0].ids) != mapBatch || len(got[1].ids) != 1 {
		t.Errorf("bfd: %d rows, want 2 (one full block, one example)", len(got))
	}
	if got := packWrapped(examples, 3); len(got) != (mapBatch+2)/3+1 || len(got[len(got)-1].ids) != 1 {
		t.Errorf("wrapped: %d rows, want %d, the last with the next block's one token", len(got), (mapBatch+2)/3+1)
	}
}
