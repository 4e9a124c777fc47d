package main

// `posttrain sft`: supervised fine-tuning with TRL v0.24's SFTConfig options (trainers/sft/config.go).

func init() {
	addCommand(trainCommand("sft",
		"supervised fine-tuning: --model M --dataset FILE --output-dir DIR",
		"Trains on prompt-completion rows (loss on the completion tokens, as TRL) or language-modelling\n"+
			"rows (text, or messages: assistant turns only unless --assistant-only-loss=false). Conversational rows\n"+
			"are rendered with the model's chat template (or --chat-template-path FILE.jinja|DIR, saved with the\n"+
			"model). Writes metrics.jsonl, checkpoint-N/ every\n"+
			"--save-steps and the final model to --output-dir; --resume continues the latest checkpoint.\n"+
			"--eval-dataset FILE with --eval-strategy steps|epoch (or --eval-on-start) adds eval_* lines.",
		nil, nil))
}
