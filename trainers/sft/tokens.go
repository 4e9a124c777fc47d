package sft

import (
	"fmt"

	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// FromTokens is the Trainer of rows that are already token ids, each a language-modelling row
// whose every token after the first is scored (as a "text" row with completion-only loss off):
// New's trainer without the tokenization, for callers that hold ids, not text (posttrain bench sft
// times its Batch and Loss through loop.Optimizer on random rows). lossType is SFTConfig's
// loss_type, nll or dft.
func FromTokens(m *trainable.Model, rows [][]int32, lossType string) (*Trainer, error) {
	loss, ok := losses[lossType]
	if !ok {
		return nil, fmt.Errorf("loss_type must be one of nll, dft, got %q", lossType)
	}
	t := &Trainer{model: m, loss: loss, countFirst: true} // as New's text rows, not padding-free
	t.examples, _ = newExampleStore(true)                 // the caller's rows, already in memory
	for i, ids := range rows {
		if len(ids) == 0 {
			return nil, fmt.Errorf("row %d has no tokens", i)
		}
		ex := example{ids: ids, scored: trues(len(ids)), units: len(ids) - 1}
		ex.first, ex.scored[0] = true, false // as New: position 0 predicts nothing
		t.examples.add(ex)
	}
	return t, nil
}
