package kto_test

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/kto"
)

// unpairedFile writes n multiplication prompts twice: answered (desirable) and refused
// (undesirable), interleaved, as conversational KTO rows.
func unpairedFile(t *testing.T, n int) string {
	var rows []data.Row
	msg := func(role, content string) data.Text {
		return data.Text{Messages: []chat.Message{{Role: role, Content: content}}}
	}
	for _, p := range mult.Problems(n, 9) {
		rows = append(rows,
			data.Row{Prompt: msg("user", p.Prompt()), Completion: msg("assistant", strconv.Itoa(p.Answer())), Label: true},
			data.Row{Prompt: msg("user", p.Prompt()), Completion: msg("assistant", "모르겠어요"), Label: false})
	}
	path := filepath.Join(t.TempDir(), "kto.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := data.WriteJSONL(f, data.Unpaired, rows); err != nil {
		t.Fatal(err)
	}
	return path
}

// KTO starts at policy = reference (rewards 0, KL 0, loss 1 − σ(0) = 0.5 with unit weights) and
// moves the desirable (answer) and undesirable (refusal) rewards apart.
func TestKTO_MovesRewardsApart(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	b := looptest.Backend(t)
	cfg := kto.DefaultConfig()
	looptest.Common(t, &cfg.Training, 3e-3, 4, 1, 6)
	tr, err := kto.New(b, m, looptest.Read(t, unpairedFile(t, 12)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
	first, last := recs[0].Metrics, recs[len(recs)-1].Metrics
	t.Logf("step 1: %v", first)
	t.Logf("step %d: %v", recs[len(recs)-1].Step, last)
	// The reference log-probs are precomputed by another executable than the training step's. The
	// pure-Go backend evaluates both in the same order (margins exactly 0); XLA fuses each its own
	// way, so a sequence's log-prob sum may differ by an ulp (measured 2026-12-02 on xla:cpu:
	// margins 7.63e-7 = β · ulp(105.87), loss 0.49999994). marginTol is β times 4 ulps of the
	// larger log-prob sum; a reference from another model is off by orders of magnitude more.
	marginTol := cfg.Beta * 4 * ulp32(max(math.Abs(first["logps/chosen"]), math.Abs(first["logps/rejected"])))
	if math.Abs(first["loss"]-0.5) > 1e-6 || first["kl"] != 0 || math.Abs(first["rewards/margins"]) > marginTol {
		t.Errorf("step 1: loss %v, kl %v, margins %v; want 0.5, 0, 0 (within %g)", first["loss"], first["kl"], first["rewards/margins"], marginTol)
	}
	for _, k := range []string{"rewards/chosen", "rewards/rejected", "logps/chosen", "logps/rejected", "kl"} {
		if _, ok := last[k]; !ok {
			t.Errorf("metrics lack %q", k)
		}
	}
	good, bad, err := tr.Rewards(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mean reward over the training rows: desirable %.4f, undesirable %.4f", good, bad)
	if !(good > 0 && bad < 0 && good-bad > 0.1) {
		t.Errorf("rewards desirable %v, undesirable %v: want them apart (> 0 > undesirable, gap > 0.1)", good, bad)
	}
}

// APO-zero unpaired needs no KL rows, so per_device_train_batch_size 1 is allowed (kto refuses
// it); it starts at loss ½ with kl 0 and moves the desirable reward up and the undesirable down.
func TestKTO_APOZeroUnpairedTrainsWithoutKL(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	b := looptest.Backend(t)
	d := looptest.Read(t, unpairedFile(t, 12))
	cfg := kto.DefaultConfig()
	looptest.Common(t, &cfg.Training, 3e-3, 1, 4, 6)
	if _, err := kto.New(b, m, d, cfg); err == nil {
		t.Fatal("loss_type kto with per_device_train_batch_size 1: no error, want one (the KL rows need ≥ 2)")
	}
	cfg.LossType = "apo_zero_unpaired"
	tr, err := kto.New(b, m, d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
	first := recs[0].Metrics
	t.Logf("step 1: %v", first)
	if math.Abs(first["loss"]-0.5) > 1e-6 || first["kl"] != 0 {
		t.Errorf("step 1: loss %v, kl %v; want 0.5, 0", first["loss"], first["kl"])
	}
	for _, r := range recs {
		if r.Metrics["kl"] != 0 {
			t.Errorf("step %d: kl %v, want 0 (no KL term)", r.Step, r.Metrics["kl"])
		}
	}
	good, bad, err := tr.Rewards(b)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("mean reward over the training rows: desirable %.4f, undesirable %.4f", good, bad)
	if !(good > 0 && bad < 0) {
		t.Errorf("rewards desirable %v, undesirable %v: want desirable > 0 > undesirable", good, bad)
	}
}

// ulp32 is the spacing of float32 values at x.
func ulp32(x float64) float64 {
	f := float32(math.Abs(x))
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}
