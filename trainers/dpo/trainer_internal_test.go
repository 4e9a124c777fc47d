package dpo

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// direct computes, from the full logits [B,S,V] of rows under m's current weights, TRL's
// nll_loss (cross-entropy over the completion tokens, ignoring id 0) and logits mean over the
// completion tokens' scoring logits and the vocabulary, in float64 on the host.
func direct(t *testing.T, b backends.Backend, m *trainable.Model, rows []encode.Encoded) (nll, meanLogits float64) {
	t.Helper()
	in := trainable.EncodedRows(rows)
	z, lsm := looptest.FullLogits(t, b, m, in.Inputs())
	s, v := len(in.IDs[0]), m.Config.VocabSize
	var sumNLL, nTok, sumZ, nZ float64
	for b := range in.IDs {
		for p := 1; p < s; p++ {
			if in.Loss[b][p] == 0 {
				continue
			}
			at := (b*s + p - 1) * v // the logits at p−1 score the token at p
			for k := range v {
				sumZ += z[at+k]
			}
			nZ += float64(v)
			if id := int(in.IDs[b][p]); id != 0 {
				sumNLL -= lsm[at+id]
				nTok++
			}
		}
	}
	return sumNLL / nTok, sumZ / nZ
}

// At step 1 (the starting weights), rpo_alpha adds exactly rpo_alpha × the chosen rows' NLL to
// the loss, nll_loss is that NLL, and logits/chosen, logits/rejected are the means of the full
// logits over the completion tokens and the vocabulary, all computed here from the full [B,S,V]
// logits of the step's micro-batch.
func TestDPO_RPOAndLogitsAtStepOne(t *testing.T) {
	dir, data := looptest.Model(t), looptest.MultFile(t, mult.DPO, 8, 7)
	const alpha = 1.5
	b := looptest.Backend(t)
	run := func(alpha float64) (map[string]float64, *Trainer, *Config) {
		m := looptest.Load(t, dir, false)
		cfg := DefaultConfig()
		cfg.RPOAlpha = alpha
		looptest.Common(t, &cfg.Training, 5e-3, 4, 1, 1)
		tr, err := New(b, m, looptest.Read(t, data), cfg)
		if err != nil {
			t.Fatal(err)
		}
		recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
		return recs[0].Metrics, tr, cfg
	}
	off, _, _ := run(0)
	on, tr, cfg := run(alpha)

	var chosen, rejected []encode.Encoded
	for _, i := range loop.Order(tr.NumExamples(), cfg.Seed, 0)[:cfg.PerDeviceTrainBatchSize] {
		chosen, rejected = append(chosen, tr.chosen[i]), append(rejected, tr.rejected[i])
	}
	start := looptest.Load(t, dir, false)
	nll, logitsChosen := direct(t, b, start, chosen)
	_, logitsRejected := direct(t, b, start, rejected)
	t.Logf("step 1: loss %.6f (rpo_alpha 0) → %.6f (%g); NLL %.6f; logits/chosen %.6f, logits/rejected %.6f",
		off["loss"], on["loss"], alpha, nll, logitsChosen, logitsRejected)

	if got := on["loss"] - off["loss"]; math.Abs(got-alpha*nll) > 1e-5 {
		t.Errorf("loss(rpo_alpha=%g) − loss(off) = %.7f, want rpo_alpha × NLL = %.7f", alpha, got, alpha*nll)
	}
	if got := on["nll_loss"]; math.Abs(got-nll) > 1e-5 {
		t.Errorf("nll_loss = %.7f, want %.7f", got, nll)
	}
	if _, ok := off["nll_loss"]; ok {
		t.Errorf("nll_loss logged with rpo_alpha off")
	}
	for _, metrics := range []map[string]float64{off, on} {
		if got := metrics["logits/chosen"]; math.Abs(got-logitsChosen) > 1e-6 {
			t.Errorf("logits/chosen = %.7f, want %.7f", got, logitsChosen)
		}
		if got := metrics["logits/rejected"]; math.Abs(got-logitsRejected) > 1e-6 {
			t.Errorf("logits/rejected = %.7f, want %.7f", got, logitsRejected)
		}
	}
}

// tokenLogProbs computes, from the full logits [B,S,V] of rows under m's current weights, each
// row's per-token log-probs lp[b][t] = log p(ids[b][t] | ids[b][<t]) and its completion mask, in
// float64 on the host.
func tokenLogProbs(t *testing.T, b backends.Backend, m *trainable.Model, rows []encode.Encoded) (lp, scored [][]float64) {
	t.Helper()
	in := trainable.EncodedRows(rows)
	_, lsm := looptest.FullLogits(t, b, m, in.Inputs())
	s, v := len(in.IDs[0]), m.Config.VocabSize
	for r := range in.IDs {
		lp, scored = append(lp, make([]float64, s)), append(scored, make([]float64, s))
		for p := 1; p < s; p++ {
			lp[r][p] = lsm[(r*s+p-1)*v+int(in.IDs[r][p])]
			scored[r][p] = float64(in.Loss[r][p])
		}
	}
	return lp, scored
}

// At step 1 with ld_alpha, logps/chosen, logps/rejected and the loss are TRL's LD-DPO, computed
// here on the host from the full logits: per pair l_p = min(l_w, l_l), the policy's log-prob sums
// column by column (TRL's arange over the whole row) with weight 1 below l_p, ld_alpha from l_p to
// the row's completion length l, 0 beyond; the reference keeps its plain sums.
func TestDPO_LDAlphaAtStepOne(t *testing.T) {
	// Short prompts and longer completions of unequal lengths, so that each row has public,
	// α-weighted and dropped columns (with the course's chat-formatted prompts every prompt is
	// longer than its completion, and TRL's rule gives 0 for every policy log-prob).
	data := filepath.Join(t.TempDir(), "ld.jsonl")
	lines := `{"prompt":"3","chosen":"12 12 12 12 12 12","rejected":"13 13"}
{"prompt":"4 4","chosen":"16","rejected":"61 61 61 61 61 61 61"}
{"prompt":"5","chosen":"25 25 25 25","rejected":"52 52 52 52 52"}
{"prompt":"6","chosen":"36 36 36 36 36 36 36 36","rejected":"63"}
`
	if err := os.WriteFile(data, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := looptest.Model(t)
	const alpha = 0.5
	b := looptest.Backend(t)
	m := looptest.Load(t, dir, false)
	cfg := DefaultConfig()
	cfg.LDAlpha = alpha
	looptest.Common(t, &cfg.Training, 5e-3, 4, 1, 1)
	tr, err := New(b, m, looptest.Read(t, data), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
	got := recs[0].Metrics

	idx := loop.Order(tr.NumExamples(), cfg.Seed, 0)[:cfg.PerDeviceTrainBatchSize]
	var rows []encode.Encoded
	for _, i := range idx {
		rows = append(rows, tr.chosen[i])
	}
	for _, i := range idx {
		rows = append(rows, tr.rejected[i])
	}
	lp, scored := tokenLogProbs(t, b, looptest.Load(t, dir, false), rows)
	n := len(idx)
	length := func(r int) (l int) {
		for _, s := range scored[r] {
			l += int(s)
		}
		return l
	}
	ld, full := make([]float64, 2*n), make([]float64, 2*n)
	for r := range rows {
		public := min(length(r%n), length(r%n+n))
		for col := range lp[r] {
			if scored[r][col] == 0 {
				continue
			}
			full[r] += lp[r][col]
			switch {
			case col < public && col < length(r):
				ld[r] += lp[r][col]
			case col < length(r):
				ld[r] += alpha * lp[r][col]
			}
		}
	}
	var meanC, meanR, loss float64
	for k := range n {
		meanC, meanR = meanC+ld[k]/float64(n), meanR+ld[n+k]/float64(n)
		margin := (ld[k] - full[k]) - (ld[n+k] - full[n+k])
		loss += math.Log1p(math.Exp(-cfg.Beta*margin)) / float64(n)
	}
	t.Logf("step 1: logps/chosen %.6f (want %.6f), logps/rejected %.6f (want %.6f), loss %.6f (want %.6f); plain sums %v",
		got["logps/chosen"], meanC, got["logps/rejected"], meanR, got["loss"], loss, full)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"logps/chosen", got["logps/chosen"], meanC}, {"logps/rejected", got["logps/rejected"], meanR}, {"loss", got["loss"], loss}} {
		if math.Abs(c.got-c.want) > 1e-5 {
			t.Errorf("%s = %.7f, want %.7f", c.name, c.got, c.want)
		}
	}
	if meanC == 0 || meanR == 0 || math.Abs(loss-math.Ln2) < 1e-3 {
		t.Errorf("degenerate data: LD log-probs %v, %v, loss %v; want rows with public and α-weighted columns", meanC, meanR, loss)
	}
}

// wpoWeights computes TRL's WPO policy_weights on the host in float64 from the full logits of
// rows [chosen…, rejected…] under m's weights: per row, TRL's rolled per-token log-probs minus
// logsumexp(2·log_softmax) at the unrolled positions, under the unrolled loss mask, averaged over
// the completion tokens; then min(exp(w_chosen + w_rejected), 1) per pair.
func wpoWeights(t *testing.T, b backends.Backend, m *trainable.Model, rows []encode.Encoded) []float64 {
	t.Helper()
	in := trainable.EncodedRows(rows)
	_, lsm := looptest.FullLogits(t, b, m, in.Inputs())
	s, v := len(in.IDs[0]), m.Config.VocabSize
	w := make([]float64, len(rows))
	for r := range rows {
		var sum, n float64
		for p := 0; p+1 < s; p++ { // logits position p scores token p+1: TRL's unrolled loss mask
			if in.Loss[r][p+1] == 0 {
				continue
			}
			var sq float64
			for k := range v {
				sq += math.Exp(2 * lsm[(r*s+p)*v+k])
			}
			rolled := 0.0 // TRL's per_token_logps after the roll: log p(token p) where p is scored
			if in.Loss[r][p] != 0 {
				rolled = lsm[(r*s+p-1)*v+int(in.IDs[r][p])]
			}
			sum += rolled - math.Log(sq)
			n++
		}
		w[r] = sum / n
	}
	k := len(rows) / 2
	out := make([]float64, k)
	for i := range k {
		out[i] = math.Min(math.Exp(w[i]+w[k+i]), 1)
	}
	return out
}

// At step 1 (policy = reference, every sigmoid loss ln 2) with use_weighting and rpo_alpha, the
// loss is TRL's mean_b weight_b·(ln 2 + rpo_alpha·NLL), the weights computed on the host from the
// full logits (wpoWeights) and the NLL as in TestDPO_RPOAndLogitsAtStepOne. The run starts from
// weights first trained on the chosen answers (RPO with a large rate): a random model's near-uniform
// distributions give every pair weight 1 (TRL's roll leaves a +log V/n in w), which would make the
// check blind.
func TestDPO_UseWeightingAtStepOne(t *testing.T) {
	dir, data := looptest.Model(t), looptest.MultFile(t, mult.DPO, 8, 7)
	const alpha = 0.5
	b := looptest.Backend(t)
	m := looptest.Load(t, dir, false)
	warm := DefaultConfig()
	warm.RPOAlpha = 1
	looptest.Common(t, &warm.Training, 3e-2, 4, 1, 12)
	trWarm, err := New(b, m, looptest.Read(t, data), warm)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loop.Run(context.Background(), m, trWarm, loop.Options{Config: warm, Backend: b}); err != nil {
		t.Fatal(err)
	}

	cfg := DefaultConfig()
	cfg.UseWeighting, cfg.RPOAlpha = true, alpha
	looptest.Common(t, &cfg.Training, 5e-3, 4, 1, 1)
	tr, err := New(b, m, looptest.Read(t, data), cfg)
	if err != nil {
		t.Fatal(err)
	}
	idx := loop.Order(tr.NumExamples(), cfg.Seed, 0)[:cfg.PerDeviceTrainBatchSize]
	var rows, chosen []encode.Encoded
	for _, i := range idx {
		rows, chosen = append(rows, tr.chosen[i]), append(chosen, tr.chosen[i])
	}
	for _, i := range idx {
		rows = append(rows, tr.rejected[i])
	}
	weights := wpoWeights(t, b, m, rows) // the starting weights of the run below
	nll, _ := direct(t, b, m, chosen)
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
	got := recs[0].Metrics["loss"]
	var want float64
	for _, w := range weights {
		want += w * (math.Ln2 + alpha*nll) / float64(len(weights))
	}
	t.Logf("step 1: loss %.7f, want %.7f; weights %v, NLL %.6f", got, want, weights, nll)
	if math.Abs(got-want) > 1e-5*math.Max(1, want) {
		t.Errorf("loss = %.7f, want mean_b weight_b·(ln 2 + %g·NLL) = %.7f", got, alpha, want)
	}
	if math.Abs(got-(math.Ln2+alpha*nll)) < 1e-4 {
		t.Errorf("weights had no effect (all 1): the check is degenerate")
	}
}
