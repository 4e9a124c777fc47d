package dpo_test

import (
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/trainers/config"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/loop"
	"github.com/posttrain/posttrain/trainers/loop/looptest"
)

// TRL 0.24.0's own DPOTrainer (scripts/reference/trl_parity.py) and posttrain, on the same tiny
// checkpoint, preference rows, row order and options (batch 2 × accumulation 2, 5 steps, β 0.1,
// linear decay), log the same loss, grad_norm, learning_rate, epoch and DPO metrics at every step,
// for every loss type posttrain offers and for DPOConfig's other options (a weighted list,
// ipo in a list, rpo_alpha, label_smoothing, reference_free, the f-divergences, ld_alpha,
// use_weighting, truncation keep_end and keep_start; batch 4 over two passes), within 1e-5 relative (float32 on both sides, summed in
// different orders). The rewards β·(log π − log π_ref) and their margins are measured against
// β·(|logps/chosen| + |logps/rejected|), the size of the terms they are a difference of (discopop's
// rewards/chosen at step 5, −0.047 from log-probs of −73 and −127, is 1e-6 apart, 2.2e-5 of
// itself). logits/chosen and logits/rejected are means over tokens × vocabulary of
// logits of order 1 and both signs, which cancel to about 1e-2 here: they are measured against
// 1, the size of the terms (posttrain sums them per row in another order; the largest
// difference, 3.3e-7, is 1.9e-4 of the mean itself).
func TestDPO_TRLParity(t *testing.T) {
	g := looptest.ReadTRLGolden(t, "trainers/dpo/testdata/trl_parity/golden.json")
	for lt := range dpo.LossTypes {
		if _, ok := g.Cases[lt]; !ok {
			t.Errorf("loss type %s has no case in the golden: add it to trl_parity.py's DPO_LOSS_TYPES", lt)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(g.Cases)) {
		t.Run(name, func(t *testing.T) {
			cfg := config.DefaultDPO()
			c := g.Configure(t, name, cfg)
			m := looptest.Load(t, g.ModelDir(t), false)
			b := looptest.Backend(t)
			tr, err := dpo.New(b, m, looptest.Read(t, c.RowsPath(t)), cfg)
			if err != nil {
				t.Fatal(err)
			}
			var ev loop.Method // the eval case's eval set: the same rows, as TRL's
			if len(c.Evals) > 0 {
				if ev, err = dpo.New(b, m, looptest.Read(t, c.RowsPath(t)), cfg); err != nil {
					t.Fatal(err)
				}
			}
			recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b, Eval: ev})
			scale := func(key string, trl map[string]float64) float64 {
				switch key {
				case "rewards/chosen", "rewards/rejected", "rewards/margins":
					return cfg.Beta * (math.Abs(trl["logps/chosen"]) + math.Abs(trl["logps/rejected"]))
				case "logits/chosen", "logits/rejected":
					return 1
				}
				return 0
			}
			looptest.CompareTRL(t, c, recs, 1e-5, scale, nil).Report(t, name)
		})
	}
}
