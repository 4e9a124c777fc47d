package decoder

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

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

// Check refuses a result that would report nothing or a number that is not one: no scored token
// (the loss of an empty mean printed as -0, exit 0), or a non-finite log-prob, last logit or
// gradient norm (encoding/json's "unsupported value: NaN" was the whole error). The error names
// the row and position, or the tensor.
func (res *ScoreResult) Check(batch *Batch) error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	scored := 0
	for r := range res.Scored {
		for t, sc := range res.Scored[r] {
			if sc != 1 {
				continue
			}
			scored++
			if lp := res.LogProbs[r][t]; !finite(lp) {
				return fmt.Errorf("row %d, position %d (token %d): log-prob %g: the model's logits are not finite", r, t, batch.IDs[r][t], lp)
			}
		}
	}
	if scored == 0 {
		return errors.New("no token to score: every row's completion (its real tokens from completion_start on, position 0 excepted) is empty")
	}
	for r, logits := range res.LastLogits {
		if i := slices.IndexFunc(logits, func(x float32) bool { return !finite(float64(x)) }); i >= 0 {
			return fmt.Errorf("row %d, position %d: logit %d is %g: the model's logits are not finite", r, res.LastIndex[r], i, logits[i])
		}
	}
	if !finite(res.Loss) {
		return fmt.Errorf("loss is %g", res.Loss)
	}
	for i, name := range res.GradNames {
		if !finite(res.GradL2[i]) {
			return fmt.Errorf("the gradient of %s has L2 norm %g", name, res.GradL2[i])
		}
	}
	return nil
}
