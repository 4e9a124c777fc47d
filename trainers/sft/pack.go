package sft

import (
	"slices"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
)

// Packing as TRL v0.24's SFTTrainer does it (trl/data_utils.py pack_dataset, _pack_bfd,
// _pack_wrapped; the rows are then shuffled and batched like unpacked examples):
//   - "bfd": every example is cut to max_length (pc.list_slice), then whole examples go into rows
//     of max_length tokens by best-fit decreasing (BFD). Each example is a segment of its row:
//     positions restart at 0 and attention stays inside it (TRL forces padding_free, whose
//     flash-attention varlen kernel does this), and its first token is not scored (the collator's
//     labels[position_ids == 0] = -100): every example contributes exactly the log-probs it has alone.
//   - "wrapped": the examples are concatenated without cutting and the stream is cut every
//     max_length tokens; a row is one sequence (positions 0..L-1, causal attention across the
//     examples in it), as TRL without padding-free. Its first token has no predecessor and is not
//     scored; the other tokens keep their examples' loss masks, including an example's first token
//     predicted from the previous example's last.
//
// Both run over consecutive blocks of mapBatch examples, as datasets.map(batched=True) hands them
// to TRL's packing functions: no row mixes examples of two blocks.
const mapBatch = 1000

// BFD returns TRL's best-fit-decreasing bins of the examples with the given lengths (each in
// [1, capacity]): examples in decreasing length (ties in index order, pyarrow's stable sort), each
// into the bin with the least space that still fits it (the oldest such bin), else a new bin.
// Bins are in creation order, their examples in insertion order.
func BFD(lengths []int, capacity int) [][]int {
	order := make([]int, len(lengths))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return lengths[b] - lengths[a] })
	var bins [][]int
	free := make([][]int, capacity) // free[s]: bins with s tokens of space left, oldest first
	for _, i := range order {
		l, b, left := lengths[i], -1, capacity
		for s := l; s < capacity; s++ {
			if len(free[s]) > 0 {
				b, left, free[s] = free[s][0], s, free[s][1:]
				break
			}
		}
		if b < 0 {
			b = len(bins)
			bins = append(bins, nil)
		}
		bins[b] = append(bins[b], i)
		if left > l {
			free[left-l] = append(free[left-l], b)
		}
	}
	return bins
}

// packBFD lays the examples (already cut to rowLen, first tokens unscored) into rows by BFD,
// one segment id per example.
func packBFD(examples []example, rowLen int) []example {
	var rows []example
	for lo := 0; lo < len(examples); lo += mapBatch {
		block := examples[lo:min(len(examples), lo+mapBatch)]
		lengths := make([]int, len(block))
		for i, ex := range block {
			lengths[i] = len(ex.ids)
		}
		for _, bin := range BFD(lengths, rowLen) {
			var row example
			for k, i := range bin {
				ex := block[i]
				row.ids = append(row.ids, ex.ids...)
				row.scored = append(row.scored, ex.scored...) // ex.scored[0] is false
				for range ex.ids {
					row.seg = append(row.seg, int32(k+1))
				}
				row.units += ex.units
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// packWrapped concatenates the examples (not cut) with their loss masks as tokenized (first
// tokens included) and cuts the stream every rowLen tokens; a row is one segment.
func packWrapped(examples []example, rowLen int) []example {
	var rows []example
	for lo := 0; lo < len(examples); lo += mapBatch {
		var ids []int32
		var scored []bool
		for _, ex := range examples[lo:min(len(examples), lo+mapBatch)] {
			ids = append(ids, ex.ids...)
			scored = append(scored, ex.scored...)
			scored[len(scored)-len(ex.ids)] = ex.first
		}
		for start := 0; start < len(ids); start += rowLen {
			end := min(len(ids), start+rowLen)
			row := example{ids: ids[start:end], scored: slices.Clone(scored[start:end]), seg: make([]int32, end-start)}
			row.first, row.scored[0] = row.scored[0], false
			for t := range row.seg {
				row.seg[t] = 1
				if row.scored[t] {
					row.units++
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// packedInputs are the graph inputs of packed rows [B, rowLen]: ids, positions restarting per
// segment, segment ids (0 = padding; attention stays within a segment) and the loss mask.
type packedInputs[T any] struct{ IDs, Pos, Segments, Loss T }

// packedBatch lays packed rows out as graph inputs (packedInputs).
func packedBatch(rows []example, rowLen int) named.Feed {
	n := len(rows)
	ids, seg, loss := make([][]int32, n), make([][]int32, n), make([][]float32, n)
	for b, r := range rows {
		ids[b], seg[b], loss[b] = make([]int32, rowLen), make([]int32, rowLen), make([]float32, rowLen)
		copy(ids[b], r.ids)
		copy(seg[b], r.seg)
		for t, s := range r.scored {
			if s {
				loss[b][t] = 1
			}
		}
	}
	return named.Of[any](packedInputs[any]{IDs: ids, Pos: decoder.SegmentPositionIDs(seg), Segments: seg, Loss: loss})
}
