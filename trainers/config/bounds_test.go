package config

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every integer option of every method, given in a --config YAML file (the flags are bounded as
// they are parsed, cmd/posttrain's TestIntFlags_HugeValuesRefusedByName), at 0, −1, 2³¹, 2⁶³−1 and
// −2⁶³: Validate answers without panicking, and refuses the values past MaxCount naming the option
// (the seed excepted). grpo's max_completion_length 9223372036854775807 used to pass validation
// and panic in models/generate.
func TestValidate_IntegerOptionsAtExtremes(t *testing.T) {
	dir := t.TempDir()
	for _, method := range []string{"sft", "dpo", "kto", "grpo", "reward", "ppo"} {
		cfg, _ := New(method)
		n := 0
		for _, f := range fields(cfg) {
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
				huge := v > MaxCount || v < -MaxCount
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
