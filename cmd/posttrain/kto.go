package main

// `posttrain kto`: Kahneman-Tversky Optimization with TRL v0.24's KTOConfig options.

func init() {
	addCommand(trainCommand("kto",
		"Kahneman-Tversky optimization: --model M --dataset FILE --output-dir DIR",
		"Trains on unpaired rows (prompt, completion, label). The KL reference point uses each prompt\n"+
			"with the previous row's completion in its batch (TRL's shift by one); --loss-type\n"+
			"apo_zero_unpaired anchors at 0 instead (no KL rows). Reference log-probs are computed\n"+
			"once, before training. Writes metrics.jsonl (rewards/chosen, rewards/rejected,\n"+
			"kl, ...), checkpoint-N/ and the final model to --output-dir.",
		nil, nil))
}
