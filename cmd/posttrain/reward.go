package main

// `posttrain reward`: a reward model with TRL v0.24's RewardTrainer/RewardConfig semantics.

func init() {
	addCommand(trainCommand("reward",
		"reward model (Bradley-Terry): --model M --dataset PREFS --output-dir DIR",
		"Trains a reward model on preference rows (chosen, rejected; explicit or implicit prompt;\n"+
			"standard or conversational) as TRL's RewardTrainer: a score head (score.weight, no bias)\n"+
			"on the last non-padding token of each sequence, loss −log σ(r_chosen − r_rejected − margin)\n"+
			"with the optional margin column, plus --center-rewards-coefficient × mean((r_c + r_r)²).\n"+
			"A causal LM gets a new score head; pairs longer than --max-length are dropped. Writes\n"+
			"metrics.jsonl (accuracy, margin, min/mean/max_reward, num_tokens), checkpoint-N/ and the\n"+
			"final model, a *ForSequenceClassification checkpoint (num_labels 1, pad_token_id), to\n"+
			"--output-dir; `posttrain score-reward --model DIR` prints its rewards.",
		nil, nil))
}
