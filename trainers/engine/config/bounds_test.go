package config_test

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Every integer option of every method, given in a --config YAML file (the flags are bounded as
// they are parsed, cmd/posttrain's TestIntFlags_HugeValuesRefusedByName), at 0, −1, 2³¹, 2⁶³−1 and
// −2⁶³: Validate answers without panicking, and refuses the values past config.MaxCount naming the option
// (the seed excepted). grpo's max_completion_length 9223372036854775807 used to pass validation
// and panic in models/generate.
func TestValidate_IntegerOptionsAtExtremes(t *testing.T) {
	dir := t.TempDir()
	for _, method := range []string{"sft", "dpo", "kto", "grpo", "reward", "ppo"} {
		cfg, _ := trainers.New(method)
		n := 0
		for _, f := range config.Fields(cfg) {
			if _, ok := f.Value.Interface().(int); !ok {
				continue
			}
			n++
			for _, v := range []int{0, -1, 1 << 31, math.MaxInt64, math.MinInt64} {
				path := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.yaml", method, f.Key, v))
				if err := os.WriteFile(path, fmt.Appendf(nil, "%s: %d\n", f.Key, v), 0o644); err != nil {
					t.Fatal(err)
				}
				args := append([]string{"--config", path}, required...)
				switch method {
				case "grpo":
					args = append(args, "--reward", "a")
				case "ppo":
					args = append(args, "--reward-model", "rm")
				}
				_, err := runCmd(t, method, args...)
				huge := v > config.MaxCount || v < -config.MaxCount
				want := fmt.Sprintf("%s (--%s) must be at ", f.Key, f.Flag)
				switch {
				case f.Key == "seed" && err != nil:
					t.Errorf("%s seed %d: %v, want any seed accepted", method, v, err)
				case f.Key != "seed" && huge && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s %s %d: got %v, want %q…", method, f.Key, v, err, want)
				}
			}
		}
		if n < 10 {
			t.Errorf("%s: %d integer options found, want all of them", method, n)
		}
	}
}

// GRPO's generation batch is a product of options bounded alone: more than config.MaxCount tokens in it
// (train or eval) is refused naming the product; the defaults and a long-completion run pass.
func TestValidate_GRPOGenerationBatchBounded(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // "" = valid
	}{
		{nil, ""},
		{[]string{"--per-device-train-batch-size", "64", "--num-generations", "8", "--max-completion-length", "16384"}, ""},
		{[]string{"--per-device-train-batch-size", "16777216", "--num-generations", "16777216"},
			"per_device_train_batch_size (--per-device-train-batch-size) × steps_per_generation × (max_prompt_length + max_completion_length) = 16777216 × 1 × (512 + 256) is more than 16777216 tokens"},
		{[]string{"--per-device-train-batch-size", "8", "--steps-per-generation", "4096", "--max-completion-length", "4096"},
			"= 8 × 4096 × (512 + 4096) is more than 16777216 tokens in one generation batch"},
		{[]string{"--eval-dataset", "e.jsonl", "--eval-strategy", "steps", "--per-device-eval-batch-size", "65536"},
			"per_device_eval_batch_size (--per-device-eval-batch-size) × (max_prompt_length + max_completion_length) = 65536 × (512 + 256) is more than 16777216 tokens"},
	} {
		_, err := runCmd(t, "grpo", append(append([]string{"--reward", "a"}, c.args...), required...)...)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
}
