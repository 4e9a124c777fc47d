package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/apps/demo"
)

// `posttrain reward` then `posttrain ppo` with that reward model on the multiplication prompts: the
// policy in --output-dir, the value model in value_model/ (a *ForSequenceClassification), TRL's
// metric names in metrics.jsonl, one line per update.
func TestPPO_CLI(t *testing.T) {
	dir := t.TempDir()
	model, err := demo.WriteBase(dir, demo.ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	rm := filepath.Join(dir, "rm")
	if _, err := runCLI(t, "reward", "--model", model, "--dataset", multData(t, dir, "dpo", "6"), "--output-dir", rm,
		"--max-steps", "1", "--per-device-train-batch-size", "3"); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ppo")
	got, err := runCLI(t, "ppo", "--model", model, "--reward-model", rm, "--dataset", "mult", "--output-dir", out,
		"--max-steps", "2", "--logging-steps", "1", "--per-device-train-batch-size", "2", "--gradient-accumulation-steps", "2",
		"--num-ppo-epochs", "2", "--num-mini-batches", "2", "--response-length", "4", "--stop-token", "eos", "--kl-estimator", "k3")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got, "ppo: 2 updates") {
		t.Errorf("stdout %q", got)
	}
	for _, f := range []string{"model.safetensors", "config.json", "tokenizer.json", "metrics.jsonl", "training_args.yaml",
		"value_model/model.safetensors", "value_model/config.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Error(err)
		}
	}
	if raw, err := os.ReadFile(filepath.Join(out, "value_model", "config.json")); err != nil || !strings.Contains(string(raw), "ForSequenceClassification") {
		t.Errorf("value_model/config.json is no classifier: %v", err)
	}
	recs := metricsLines(t, out)
	if len(recs) != 2 || recs[1].Step != 2 {
		t.Fatalf("metrics.jsonl: %d lines, want one per update", len(recs))
	}
	for _, k := range []string{"eps", "objective/kl", "objective/entropy", "objective/non_score_reward", "objective/rlhf_reward",
		"objective/scores", "policy/approxkl_avg", "policy/clipfrac_avg", "loss/policy_avg", "loss/value_avg", "val/clipfrac_avg",
		"policy/entropy_avg", "val/ratio", "val/ratio_var", "val/num_eos_tokens", "lr", "episode"} {
		if _, ok := recs[0].Metrics[k]; !ok {
			t.Errorf("metrics.jsonl lacks %s: %v", k, recs[0].Metrics)
		}
	}
	if recs[1].Metrics["episode"] != 8 {
		t.Errorf("episode %v after 2 updates of 4 prompts, want 8", recs[1].Metrics["episode"])
	}
}

// Bad options are one-line errors naming the option, before any model is read.
func TestPPO_CLIErrors(t *testing.T) {
	base := []string{"ppo", "--model", "m", "--dataset", "mult", "--output-dir", "o"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "reward_model_path (--reward-model) is required"},
		{[]string{"--reward-model", "rm", "--kl-estimator", "k2"}, "kl_estimator (--kl-estimator) must be one of k1, k3"},
		{[]string{"--reward-model", "rm", "--num-mini-batches", "3"}, "num_mini_batches (--num-mini-batches) (3) must divide gradient_accumulation_steps (1)"},
		{[]string{"--reward-model", "rm", "--stop-token", "eos", "--stop-token-id", "5"}, "stop_token (--stop-token) and stop_token_id are exclusive"},
		{[]string{"--reward-model", "rm", "--use-peft"}, "use_peft (--use-peft) is not supported by ppo"},
		{[]string{"--reward-model", "rm", "--whiten-rewards", "--per-device-train-batch-size", "4"}, "whiten_rewards (--whiten-rewards) needs mini-batches of ≥ 8 rows"},
		{[]string{"--reward-model", "rm", "--cliprange", "0"}, "cliprange (--cliprange) must be > 0"},
	} {
		_, err := runCLI(t, append(append([]string{}, base...), tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", tc.args, err, tc.want)
		}
	}
}
