package main

import (
	"os"
	"path/filepath"
	"testing"
)

// quickStartReward is TRL's GRPO quick start's reward function, as its README writes it.
const quickStartReward = `# Dummy reward function: count the number of unique characters in the completions
def reward_num_unique_chars(completions, **kwargs):
    return [len(set(c)) for c in completions]
`

// The three TRL quick starts of docs/from-trl.md, run as that page writes them (TRL's flag
// spellings, Hub dataset ids, a Python reward file), with a tiny model for the Qwen checkpoint,
// local copies of the datasets' shapes served as the Hub serves them, and one step each.
func TestFromTRL_QuickStarts(t *testing.T) {
	needPython3(t)
	tldr := filepath.Join(t.TempDir(), "tldr")
	b, err := os.ReadFile(filepath.Join(datasetsDir, "tldr", "tldr.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(tldr, "data"), 0o755)
	if err := os.WriteFile(filepath.Join(tldr, "data", "train-00000-of-00001.parquet"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	fakeDatasetHub(t, map[string]string{
		"trl-lib/Capybara":                filepath.Join(datasetsDir, "capybara"),
		"trl-lib/ultrafeedback_binarized": filepath.Join(datasetsDir, "ultrafeedback"),
		"trl-lib/tldr":                    tldr,
	})
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	rewards := filepath.Join(dir, "rewards.py")
	if err := os.WriteFile(rewards, []byte(quickStartReward), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"sft", "--model_name_or_path", model, "--dataset_name", "trl-lib/Capybara", "--output_dir", filepath.Join(dir, "Qwen2.5-0.5B-SFT")},
		{"dpo", "--dataset_name", "trl-lib/ultrafeedback_binarized", "--model_name_or_path", model, "--output_dir", filepath.Join(dir, "Qwen2.5-0.5B-DPO")},
		{"grpo", "--model_name_or_path", model, "--dataset_name", "trl-lib/tldr", "--reward_funcs", rewards + ":reward_num_unique_chars",
			"--output_dir", filepath.Join(dir, "Qwen2-0.5B-GRPO")},
	} {
		if _, err := runCLI(t, append(args, "--max_steps", "1", "--logging_steps", "1")...); err != nil {
			t.Fatalf("%s: %v", args[0], err)
		}
		out := args[len(args)-1]
		if args[0] == "grpo" {
			out = filepath.Join(dir, "Qwen2-0.5B-GRPO")
		}
		recs := metricsLines(t, out)
		if len(recs) == 0 {
			t.Fatalf("%s: no metrics", args[0])
		}
		if args[0] == "grpo" {
			if _, ok := recs[0].Metrics["rewards/reward_num_unique_chars/mean"]; !ok {
				t.Errorf("grpo: no rewards/reward_num_unique_chars/mean in %v", recs[0].Metrics)
			}
		}
	}
}
