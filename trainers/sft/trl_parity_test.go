package sft_test

import (
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// TRL 0.24.0's own SFTTrainer (scripts/reference/trl_parity.py) and posttrain, on the same tiny
// checkpoint, rows, row order and options (prompt-completion rows, batch 2 × accumulation 2, 5
// steps; nll with a warmup and weight decay, dft with a cosine schedule, every token scored with
// the rows cut to max_length 12, conversational rows with assistant_only_loss false, bfd and
// wrapped packing; batch 4 over two passes), log the same loss,
// grad_norm, learning_rate, epoch and SFT metrics at every step, within 1e-5 relative: float32
// on both sides, summed in different orders.
func TestSFT_TRLParity(t *testing.T) {
	g := looptest.ReadTRLGolden(t, "trainers/sft/testdata/trl_parity/golden.json")
	for _, name := range []string{"nll_warmup_decay", "dft_cosine", "all_tokens_truncated", "messages_all_tokens",
		"packing_bfd", "packing_wrapped", "two_passes", "eval"} {
		t.Run(name, func(t *testing.T) {
			cfg := sft.DefaultConfig()
			c := g.Configure(t, name, cfg)
			m := looptest.Load(t, g.ModelDir(t), false)
			recs := looptest.TrainTRLCase(t, c, m, cfg, func(rows *data.Dataset) (loop.Method, error) { return sft.New(m, rows, cfg) })
			looptest.CompareTRL(t, c, recs, 1e-5, nil, nil).Report(t, name)
		})
	}
}
