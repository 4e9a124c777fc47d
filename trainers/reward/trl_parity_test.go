package reward

import (
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// TRL 0.24.0's own RewardTrainer (scripts/reference/trl_parity.py) and posttrain, on the same
// tiny Qwen3ForSequenceClassification checkpoint (the script's, score head included), preference
// rows with an explicit prompt, row order and options (batch 2 × accumulation 2, 5 steps, linear
// decay; with and without center_rewards_coefficient; batch 4 over two passes; with evaluation;
// with a margin column), log the same loss, grad_norm,
// learning_rate, epoch and reward metrics at every step, within 1e-5 relative (float32 on both
// sides, summed in different orders). mean_reward, the mean of rewards of both signs that cancel
// to about 1e-2 (4e-7 apart, 3.4e-5 of the mean itself), is measured against max_reward −
// min_reward, the spread of the rewards it is made of.
func TestReward_TRLParity(t *testing.T) {
	g := looptest.ReadTRLGolden(t, "trainers/reward/testdata/trl_parity/golden.json")
	for _, name := range []string{"default", "center_rewards", "two_passes", "eval", "margin"} {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			c := g.Configure(t, name, cfg)
			m, fresh, err := trainable.LoadClassifier(g.ModelDir(t), false, 1, 0)
			if err != nil || fresh {
				t.Fatalf("LoadClassifier: fresh %v (want the checkpoint's score head), %v", fresh, err)
			}
			recs := looptest.TrainTRLCase(t, c, m, cfg, func(rows *data.Dataset) (loop.Method, error) { return New(m, rows, cfg) })
			scale := func(key string, trl map[string]float64) float64 {
				if key == "mean_reward" {
					return trl["max_reward"] - trl["min_reward"]
				}
				return 0
			}
			looptest.CompareTRL(t, c, recs, 1e-5, scale, nil).Report(t, name)
		})
	}
}
