package main

// `posttrain sft`: supervised fine-tuning with TRL v0.24's SFTConfig options (trainers/engine/config).

import (
	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/sft"
)

func init() {
	addCommand(trainCommand("sft",
		"supervised fine-tuning: --model M --dataset FILE --output-dir DIR",
		"Trains on prompt-completion rows (loss on the completion tokens, as TRL) or language-modelling\n"+
			"rows (text, or messages: assistant turns only unless --assistant-only-loss=false). Conversational rows\n"+
			"are rendered with the model's chat template (or --chat-template-path FILE.jinja|DIR, saved with the\n"+
			"model). Writes metrics.jsonl, checkpoint-N/ every\n"+
			"--save-steps and the final model to --output-dir; --resume continues the latest checkpoint.\n"+
			"--eval-dataset FILE with --eval-strategy steps|epoch (or --eval-on-start) adds eval_* lines.",
		func(b backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) (loop.Method, error) {
			c := cfg.(*config.SFT)
			train, err := sft.New(m, d, c)
			if err != nil {
				return nil, err
			}
			return loop.WithEvalData(train, &c.Training, readOptions(c), func(d *data.Dataset) (loop.Method, error) {
				return sft.New(m, d, c)
			})
		}))
}
