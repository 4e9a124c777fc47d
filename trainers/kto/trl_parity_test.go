package kto_test

import (
	"maps"
	"math"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/kto"
)

// TRL 0.24.0's own KTOTrainer (scripts/reference/trl_parity.py) and posttrain, on the same tiny
// checkpoint, unpaired rows (a third undesirable), row order (the file's: KTOTrainer's own
// SequentialSampler, which posttrain's KTO follows, loop.Sequential) and options (batch 2 ×
// accumulation 2, 5 steps, β 0.1, linear decay; loss_type kto with its KL reference point and
// apo_zero_unpaired; β 0.2, undesirable_weight 1.5 and truncation to max_length 16 with
// max_prompt_length 8; batch 4 over two passes), log the same loss, grad_norm, learning_rate, epoch and KTO metrics at every
// step, within 1e-5 relative (float32 on both sides, summed in different orders). A step whose
// micro-batches hold no undesirable row logs no rejected metrics on either side. The rewards
// β·(log π − log π_ref) and margins are measured against β·(|logps/chosen| + |logps/rejected|),
// kl (a mean of log π − log π_ref over the KL rows) against |logps/chosen| + |logps/rejected|: the
// size of the terms they are differences of (weights_truncate's rewards/chosen at step 5, 0.118
// from log-probs of −64 and −58, is 1.9e-6 apart, 1.6e-5 of itself).
//
// One difference by design (docs/training.md, "KTO logits/chosen, logits/rejected"): TRL's
// logits/chosen and logits/rejected sum each row's logits over its positions and the vocabulary,
// the padding positions of the micro-batch included; posttrain sums the row's real positions
// only. The golden has TRL's sum over the real positions too (logits/…@real_tokens, from the same
// forward pass), which posttrain's must equal within 1e-5 of Σ|logit| (…@real_tokens_abs: the
// sums cancel to about 2% of it), while TRL's own value must differ from it.
func TestKTO_TRLParity(t *testing.T) {
	g := looptest.ReadTRLGolden(t, "trainers/kto/testdata/trl_parity/golden.json")
	for _, name := range []string{"kto", "apo_zero_unpaired", "weights_truncate", "two_passes", "eval"} {
		t.Run(name, func(t *testing.T) { checkKTOCase(t, g, name) })
	}
}

// On the Gemma 3 fixture (final_logit_softcapping 5), TRL's KTOTrainer sums the soft-capped
// logits c·tanh(z/c) into logits/chosen and logits/rejected; posttrain's equal TRL's real-token
// sums of them, and every other metric TRL's, by TestKTO_TRLParity's rules (trl_parity.py's
// golden_gemma3.json). The uncapped sums (h·Σ_v W_v, posttrain's value before it capped them)
// are 4.5e-3 to 9e-3 of Σ|logit| away, far past the 1e-5 allowed.
func TestKTO_TRLParityGemma3Softcap(t *testing.T) {
	g := looptest.ReadTRLGolden(t, "trainers/kto/testdata/trl_parity/golden_gemma3.json")
	if g.Model != "models/testdata/gemma3-tiny/model" || len(g.Cases) == 0 {
		t.Fatalf("golden_gemma3.json: model %s, %d cases; want the gemma3-tiny fixture", g.Model, len(g.Cases))
	}
	for _, name := range slices.Sorted(maps.Keys(g.Cases)) {
		t.Run(name, func(t *testing.T) { checkKTOCase(t, g, name) })
	}
}

// checkKTOCase runs posttrain on the golden's case name and compares it with TRL's steps
// (TestKTO_TRLParity says how).
func checkKTOCase(t *testing.T, g *looptest.TRLGolden, name string) {
	t.Helper()
	cfg := kto.DefaultConfig()
	c := g.Configure(t, name, cfg)
	m := looptest.Load(t, g.ModelDir(t), false)
	recs := looptest.TrainTRLCase(t, c, m, cfg, func(rows *data.Dataset) (loop.Method, error) {
		return kto.New(looptest.Backend(t), m, rows, cfg)
	})
	padded, worst := 0, 0.0 // steps where TRL's padded sum differs from its real-token sum; the largest difference
	diff := looptest.Differences{}
	for _, split := range []string{"chosen", "rejected"} {
		key, real := "logits/"+split, "logits/"+split+"@real_tokens"
		diff[real], diff[real+"_abs"] = nil, nil // TRL-side references only
		diff[key] = func(t testing.TB, step int, trl, got map[string]float64) {
			want, ok := trl[real]
			if !ok {
				t.Errorf("step %d: the golden has %s but not %s", step, key, real)
				return
			}
			d := math.Abs(got[key] - want)
			worst = math.Max(worst, d/trl[real+"_abs"])
			if !(d <= 1e-5*trl[real+"_abs"]) {
				t.Errorf("step %d %s: posttrain %.9g, TRL over the real tokens %.9g (%.2g of Σ|logit| %.6g > 1e-5)",
					step, key, got[key], want, d/trl[real+"_abs"], trl[real+"_abs"])
			}
			if math.Abs(trl[key]-want) > 1e-5*trl[real+"_abs"] {
				padded++
			}
		}
	}
	scale := func(key string, trl map[string]float64) float64 {
		logps := math.Abs(trl["logps/chosen"]) + math.Abs(trl["logps/rejected"])
		switch key {
		case "rewards/chosen", "rewards/rejected", "rewards/margins":
			return cfg.Beta * logps
		case "kl":
			return logps
		}
		return 0
	}
	looptest.CompareTRL(t, c, recs, 1e-5, scale, diff).Report(t, name)
	t.Logf("%s: logits/* against TRL's real-token sums: largest difference %.2g of Σ|logit|", name, worst)
	if padded == 0 {
		t.Errorf("TRL's logits/chosen and logits/rejected equal its real-token sums at every step: the padding difference the test names is gone")
	}
}
