package qwen2

import "slices"

// Report is a ScoreResult in the JSON layout of the qwen2-tiny expected files
// (models/testdata/qwen2-tiny/expected): the scored tokens' positions, ids and log-probs per row.
type Report struct {
	TokenPositions    [][]int     `json:"token_positions"`
	TokenIDs          [][]int32   `json:"token_ids"`
	TokenLogProbs     [][]float64 `json:"token_logprobs"`
	SeqLogProb        []float64   `json:"seq_logprob"`
	NCompletionTokens int         `json:"n_completion_tokens"`
	Loss              float64     `json:"loss"`
	LastIndex         []int       `json:"last_index"`
	LastLogitsFirst8  [][]float64 `json:"last_logits_first8"`
	LastArgmax        []int       `json:"last_argmax"`
	LogitsChecksum    Checksum    `json:"logits_checksum"`
	Grad              *GradReport `json:"grad,omitempty"`
}

// GradReport holds the gradient norms of the loss per HF tensor name and overall.
type GradReport struct {
	L2       map[string]float64 `json:"l2"`
	GlobalL2 float64            `json:"global_l2"`
}

// Report lays out the result for batch.
func (res *ScoreResult) Report(batch *Batch) *Report {
	b, _ := batch.Dims()
	rep := &Report{Loss: res.Loss, LastIndex: res.LastIndex, LogitsChecksum: res.Checksum}
	for r := range b {
		var pos []int
		var ids []int32
		var lps []float64
		seq := 0.0
		for t, sc := range res.Scored[r] {
			if sc == 1 {
				pos, ids, lps = append(pos, t), append(ids, batch.IDs[r][t]), append(lps, res.LogProbs[r][t])
				seq += res.LogProbs[r][t]
			}
		}
		rep.TokenPositions = append(rep.TokenPositions, pos)
		rep.TokenIDs = append(rep.TokenIDs, ids)
		rep.TokenLogProbs = append(rep.TokenLogProbs, lps)
		rep.SeqLogProb = append(rep.SeqLogProb, seq)
		rep.NCompletionTokens += len(pos)
		logits := res.LastLogits[r]
		first := make([]float64, min(8, len(logits)))
		for i := range first {
			first[i] = float64(logits[i])
		}
		rep.LastLogitsFirst8 = append(rep.LastLogitsFirst8, first)
		rep.LastArgmax = append(rep.LastArgmax, argmax(logits))
	}
	if res.GradNames != nil {
		rep.Grad = &GradReport{L2: map[string]float64{}, GlobalL2: res.GlobalL2}
		for i, name := range res.GradNames {
			rep.Grad.L2[name] = res.GradL2[i]
		}
	}
	return rep
}

// argmax returns the index of the largest value, the lowest index on ties.
func argmax(x []float32) int {
	return slices.Index(x, slices.Max(x))
}
