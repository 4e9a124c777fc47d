package trainable

import (
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
)

// Bucket rounds a sequence length up to a shape bucket: a power of two from 16 to 512, then a
// multiple of 256. Batches padded to buckets reuse a few compiled graphs instead of one per length.
func Bucket(n int) int {
	if n > 512 {
		return (n + 255) / 256 * 256
	}
	b := 16
	for b < n {
		b *= 2
	}
	return b
}

// Rows is a right-padded batch of token rows as the graph functions take them: ids, attention
// mask and HF position ids [B,T] int32, and the loss mask [B,T] float32 (1 on the tokens whose
// log-probs count: lp[t] scores ids[t] given ids[<t], so Loss[b][0] is always 0).
type Rows struct {
	IDs, Mask, Pos [][]int32
	Loss           [][]float32
}

// PadRows lays out token rows right-padded (with id 0) to length t; lossFrom[b] is the first position
// of row b whose token is scored (its completion start; the rest of the row is scored).
func PadRows(rows [][]int32, lossFrom []int, t int) Rows {
	r := Rows{IDs: make([][]int32, len(rows)), Mask: make([][]int32, len(rows)), Loss: make([][]float32, len(rows))}
	for b, row := range rows {
		r.IDs[b], r.Mask[b], r.Loss[b] = make([]int32, t), make([]int32, t), make([]float32, t)
		copy(r.IDs[b], row)
		for i := range row {
			r.Mask[b][i] = 1
			if i >= max(1, lossFrom[b]) {
				r.Loss[b][i] = 1
			}
		}
	}
	r.Pos = decoder.PositionIDs(r.Mask)
	return r
}

// PadRowsMasked is PadRows with an explicit per-token loss mask (true = scored), e.g. assistant tokens.
func PadRowsMasked(rows [][]int32, scored [][]bool, t int) Rows {
	r := PadRows(rows, make([]int, len(rows)), t)
	for b := range rows {
		for i := range r.Loss[b] {
			r.Loss[b][i] = 0
			if i >= 1 && i < len(scored[b]) && scored[b][i] {
				r.Loss[b][i] = 1
			}
		}
	}
	return r
}

// RowInputs are the graph inputs of a batch of token rows (Rows): ids, HF position ids and
// attention mask [B,T] int32, and the loss mask [B,T] float32. T is any on the host and
// *graph.Node in the graph (internal/named); a method whose batch carries more embeds RowInputs in
// its own input struct.
type RowInputs[T any] struct{ IDs, Pos, Mask, Loss T }

// Fields returns the rows as graph inputs, for a method's input struct that embeds them.
func (r Rows) Fields() RowInputs[any] {
	return RowInputs[any]{IDs: r.IDs, Pos: r.Pos, Mask: r.Mask, Loss: r.Loss}
}

// Inputs returns the rows as the Feed of RowInputs.
func (r Rows) Inputs() named.Feed { return named.Of[any](r.Fields()) }

// MaxLen is the longest row.
func MaxLen(rows [][]int32) int {
	m := 0
	for _, r := range rows {
		m = max(m, len(r))
	}
	return m
}
