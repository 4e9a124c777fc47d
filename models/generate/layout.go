package generate

import (
	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/internal/backend"
)

// The host side of a batch: rows are left-padded to a prompt bucket, so that every row's last
// prompt token sits in the same column and the decode steps write the same cache slot in every
// row; rows and lengths are rounded up to buckets, so that a few compiled graphs serve every call.

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

// PromptBucket is the prompt bucket on backend b. The prompt pass computes every padded column, so
// on GoMLX's pure-Go backend, where compiling another graph takes milliseconds, prompts of more
// than 32 tokens are padded to a multiple of 32 instead of a power of two (a 70-token prompt runs
// as 96 rows, not 128). Not finer: that backend's blocked matrix kernel pads the rows of a product
// to 32 anyway, and products of fewer rows run in its direct kernel, which measured slower per
// row (a 20-token chat prompt at Qwen2.5-0.5B's shape: 12.5-12.6 s to the first token as 32 rows,
// 13.7-13.8 s as 24). Compiling backends (XLA) keep BucketLen's few buckets.
func PromptBucket(b backends.Backend, n int) int {
	if !backend.IsPureGo(b) || n <= 32 || n > 256 {
		return BucketLen(n)
	}
	return (n + 31) / 32 * 32
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

// PositionIDs are the position ids of left-padded rows as HF's generate() makes them for every
// family: cumsum(mask) − 1, with pads set to 1 (they never reach a real token through attention).
func PositionIDs(mask [][]int32) [][]int32 {
	out := make([][]int32, len(mask))
	for r, row := range mask {
		out[r] = make([]int32, len(row))
		var c int32
		for t, m := range row {
			c += m
			out[r][t] = c - 1
			if m == 0 {
				out[r][t] = 1
			}
		}
	}
	return out
}

func countReal(mask []int32) int {
	n := 0
	for _, m := range mask {
		n += int(m)
	}
	return n
}
