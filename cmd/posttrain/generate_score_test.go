package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// score --gen N adds HF's greedy generation section: tokens with and without the KV cache.
func TestScore_CLIGeneration(t *testing.T) {
	for name, n := range map[string]int{"left_pad": 5, "single": 8} {
		t.Run(name, func(t *testing.T) {
			got, full := scoreFixture(t, name, "--gen", strconv.Itoa(n))
			gen := full["generation"].(map[string]any)
			want := map[string]any{}
			for _, k := range []string{"max_new_tokens", "tokens_cache", "tokens_nocache", "agree", "logprobs_cache", "logprobs_nocache"} {
				want[k] = gen[k]
			}
			compareJSON(t, name+".generation", got["generation"], want, 1e-4)
		})
	}
	if _, err := runCLI(t, "score", "--model", filepath.Join(tinyFixture, "model"),
		"--input", filepath.Join(tinyFixture, "inputs", "single.json"), "--gen", "-1"); err == nil || !strings.Contains(err.Error(), "--gen") {
		t.Errorf("--gen -1: got %v, want a usage error", err)
	}
}
