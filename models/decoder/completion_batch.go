package decoder

import (
	"fmt"

	"github.com/posttrain/posttrain/models/generate"
)

// CompletionBatch lays out prompts and their generations for scoring (Score, TokenLogProbs,
// a trainer's policy and reference log-probs): row r is prompts[r] left-padded to the longest
// prompt P, then gens[r].IDs (the stop token included) right-padded to the longest generation,
// with id 0 in the padding. CompletionStart is P for every row, so ScoredMask marks exactly the
// generated tokens.
func CompletionBatch(prompts [][]int32, gens []generate.Generation) (*Batch, error) {
	if len(prompts) != len(gens) || len(prompts) == 0 {
		return nil, fmt.Errorf("model: completion batch of %d prompts and %d generations", len(prompts), len(gens))
	}
	plen, clen := 0, 0
	for _, p := range prompts {
		plen = max(plen, len(p))
	}
	for _, g := range gens {
		clen = max(clen, len(g.IDs))
	}
	b := &Batch{}
	for r, p := range prompts {
		ids, mask := make([]int32, plen+clen), make([]int32, plen+clen)
		copy(ids[plen-len(p):], p)
		copy(ids[plen:], gens[r].IDs)
		for t := plen - len(p); t < plen+len(gens[r].IDs); t++ {
			mask[t] = 1
		}
		b.IDs, b.Mask, b.CompletionStart = append(b.IDs, ids), append(b.Mask, mask), append(b.CompletionStart, plen)
	}
	return b, nil
}

// PromptsFromBatch returns each row's real tokens (mask = 1), dropping the padding on either side.
func PromptsFromBatch(b *Batch) [][]int32 {
	out := make([][]int32, len(b.IDs))
	for r, row := range b.IDs {
		for t, id := range row {
			if b.Mask[r][t] == 1 {
				out[r] = append(out[r], id)
			}
		}
	}
	return out
}
