package generate

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
