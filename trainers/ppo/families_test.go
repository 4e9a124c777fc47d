package ppo

import (
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// PPO on every fixture family (Qwen3, Llama, SmolLM2's Llama form, SmolLM3, Gemma 3), each its
// own reward and value model: the first micro-batch's ratio is 1, and 2 updates straight equal 1
// update, Ctrl-C and a resumed update, bit for bit (policy, value model, metrics).
func TestPPO_Families(t *testing.T) {
	for _, fixture := range looptest.Fixtures {
		t.Run(fixture, func(t *testing.T) {
			dir := looptest.Fixture(t, fixture)
			rm := rewardModel(t, dir, 11)
			newConfig := func() *Config {
				c := tinyConfig(t, dir, rm)
				c.GradientAccumulationSteps, c.NumPPOEpochs, c.NumMiniBatches, c.ResponseLength = 2, 1, 1, 4
				return c
			}
			infos, err := run(t, newConfig(), 0)
			if err != nil {
				t.Fatal(err)
			}
			checkRatioOne(t, "update 1", infos[0].First)
			if kl := infos[0].Metrics["objective/kl"]; kl != 0 {
				t.Errorf("update 1: objective/kl %g, want 0", kl)
			}
			resumeCheck(t, newConfig, 2)
		})
	}
}
