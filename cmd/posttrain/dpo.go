package main

// `posttrain dpo`: Direct Preference Optimization with TRL v0.24's DPOConfig options.

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
		nil, nil))
}
