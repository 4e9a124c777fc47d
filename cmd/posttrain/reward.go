package main

// `posttrain reward`: a reward model with TRL v0.24's RewardTrainer/RewardConfig semantics.

import (
	"log/slog"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/reward"
)

func init() {
	modelLoaders["reward"] = func(dir string, cfg config.Config) (*trainable.Model, error) {
		c := cfg.Common()
		m, fresh, err := trainable.LoadClassifier(dir, c.BF16, 1, uint64(c.Seed))
		if err == nil && fresh {
			slog.Info("reward model: a causal LM; its LM head is dropped and a new score head drawn (AutoModelForSequenceClassification, num_labels 1)", "model", dir)
		}
		return m, err
	}
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
		func(_ backends.Backend, m *trainable.Model, d *data.Dataset, cfg config.Config) (loop.Method, error) {
			c := cfg.(*config.Reward)
			train, err := reward.New(m, d, c)
			if err != nil {
				return nil, err
			}
			return loop.WithEvalData(train, &c.Training, readOptions(c), func(d *data.Dataset) (loop.Method, error) {
				return reward.New(m, d, c)
			})
		}))
}
