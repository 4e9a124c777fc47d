package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --devices is refused in one line naming the flag, before the model or the dataset is read
// (neither exists here): more devices than the backend has (the pure-Go backend has one), a
// negative count, --fsdp and --tensor-parallel for GRPO and PPO (their generation reads the whole
// weights), both of them together, and each on the pure-Go backend.
func TestTrainCommands_DevicesRefused(t *testing.T) {
	dir := t.TempDir()
	missing := []string{"--model", filepath.Join(dir, "no-model"), "--dataset", filepath.Join(dir, "no.jsonl")}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sft", "--backend", "go", "--devices", "2"}, "devices (--devices) 2: the backend go:parallelism=-1 has 1 device"},
		{[]string{"dpo", "--backend", "go", "--devices", "4"}, "devices (--devices) 4: the backend go:parallelism=-1 has 1 device"},
		{[]string{"kto", "--devices", "-1"}, "devices (--devices) must be ≥ 1 (or 0: every device of the backend), got -1"},
		{[]string{"grpo", "--backend", "go", "--devices", "2", "--reward", "mult_strict"}, "devices (--devices) 2: the backend go:parallelism=-1 has 1 device"},
		{[]string{"grpo", "--devices", "2", "--fsdp", "--reward", "mult_exact"}, "fsdp (--fsdp) is not for grpo, which generates with the whole weights on each device: use --devices N without it (data parallel)"},
		{[]string{"ppo", "--backend", "go", "--devices", "2", "--reward-model", filepath.Join(dir, "no-rm")}, "devices (--devices) 2: the backend go:parallelism=-1 has 1 device"},
		{[]string{"ppo", "--devices", "2", "--fsdp", "--reward-model", filepath.Join(dir, "no-rm")}, "fsdp (--fsdp) is not for ppo, which generates with the whole weights on each device: use --devices N without it (data parallel)"},
		{[]string{"sft", "--backend", "go", "--fsdp"}, "fsdp (--fsdp) needs an XLA backend (its SPMD partitioner splits the state); the backend go:parallelism=-1 has 1 device"},
		{[]string{"sft", "--backend", "go", "--tensor-parallel"}, "tensor_parallel (--tensor-parallel) needs an XLA backend (its SPMD partitioner splits the projections); the backend go:parallelism=-1 has 1 device"},
		{[]string{"dpo", "--tensor-parallel", "--fsdp"}, "tensor_parallel (--tensor-parallel) and --fsdp split the same weights two ways: give one of them"},
		{[]string{"grpo", "--devices", "2", "--tensor-parallel", "--reward", "mult_exact"}, "tensor_parallel (--tensor-parallel) is not for grpo, which generates with the whole weights on each device: use --devices N without it (data parallel)"},
		{[]string{"ppo", "--devices", "2", "--tensor-parallel", "--reward-model", filepath.Join(dir, "no-rm")}, "tensor_parallel (--tensor-parallel) is not for ppo, which generates with the whole weights on each device: use --devices N without it (data parallel)"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out := filepath.Join(dir, "out-"+c.args[0])
			_, err := runCLI(t, append(append(c.args, missing...), "--output-dir", out)...)
			var u usageError
			if err == nil || !errors.As(err, &u) {
				t.Fatalf("error %v, want a usage error", err)
			}
			if msg := err.Error(); !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line with %q", msg, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("%s was created (%v): the refusal must come first", out, err)
			}
		})
	}
}
