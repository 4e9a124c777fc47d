package main

// `posttrain dpo`: Direct Preference Optimization with TRL v0.24's DPOConfig options.

import (
	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

func init() {
	addCommand(trainCommand("dpo",
		"direct preference optimization: --model M --dataset FILE --output-dir DIR",
		"Trains on preference rows (prompt, chosen, rejected) with TRL's DPO losses: sigmoid\n"+
			"(--label-smoothing for cDPO), ipo, hinge, robust, exo_pair, nca_pair, sppo_hard, aot,\n"+
			"aot_pair, discopop, apo_zero, apo_down, sft, or several summed with --loss-weights\n"+
			"(--loss-type sigmoid,sft); --rpo-alpha adds the chosen completions' NLL (RPO). Reference\n"+
			"log-probs are computed once, before training, from the starting\n"+
			"weights. Writes metrics.jsonl (rewards/chosen, rewards/margins, ...), checkpoint-N/ and the\n"+
			"final model to --output-dir.",
		func(b backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) (loop.Method, error) {
			c := cfg.(*config.DPO)
			train, err := dpo.New(b, m, d, c)
			if err != nil {
				return nil, err
			}
			return loop.WithEvalData(train, &c.Training, readOptions(c), func(d *data.Dataset) (loop.Method, error) {
				return dpo.New(b, m, d, c)
			})
		}))
}
