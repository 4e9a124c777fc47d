package main

// `posttrain kto`: Kahneman-Tversky Optimization with TRL v0.24's KTOConfig options.

import (
	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/kto"
)

func init() {
	addCommand(trainCommand("kto",
		"Kahneman-Tversky optimization: --model M --dataset FILE --output-dir DIR",
		"Trains on unpaired rows (prompt, completion, label). The KL reference point uses each prompt\n"+
			"with the previous row's completion in its batch (TRL's shift by one); --loss-type\n"+
			"apo_zero_unpaired anchors at 0 instead (no KL rows). Reference log-probs are computed\n"+
			"once, before training. Writes metrics.jsonl (rewards/chosen, rewards/rejected,\n"+
			"kl, ...), checkpoint-N/ and the final model to --output-dir.",
		func(b backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) (loop.Method, error) {
			c := cfg.(*config.KTO)
			train, err := kto.New(b, m, d, c)
			if err != nil {
				return nil, err
			}
			return loop.WithEvalData(train, &c.Training, readOptions(c), func(d *data.Dataset) (loop.Method, error) {
				return kto.New(b, m, d, c)
			})
		}))
}
