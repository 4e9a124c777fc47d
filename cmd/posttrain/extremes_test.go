package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/apps/demo"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// intFlag is one integer flag of a command: the command's path from the root and the flag.
type intFlag struct {
	path []string
	name string
	seed bool // a seed: any value is valid (unboundedIntFlags)
}

// intFlags walks the command tree, so that a flag added later is swept too.
func intFlags(c *cli.Command, path []string) []intFlag {
	var out []intFlag
	for _, f := range c.Flags {
		switch f.(type) {
		case *cli.IntFlag, *cli.Int64Flag, *cli.Int32Flag, *cli.UintFlag, *cli.Uint64Flag, *cli.Uint32Flag:
			name := f.Names()[0]
			_, isInt := f.(*cli.IntFlag)
			out = append(out, intFlag{path: path, name: name, seed: !isInt || slices.Contains(unboundedIntFlags, name)})
		}
	}
	for _, sub := range c.Commands {
		out = append(out, intFlags(sub, append(slices.Clone(path), sub.Name))...)
	}
	return out
}

// oneLine reports whether stderr is one line naming the flag.
func oneLine(stderr, flag string) bool {
	return strings.Count(stderr, "\n") == 1 && strings.Contains(stderr, "-"+flag)
}

// Every integer flag of every command but the seeds refuses 2³¹ and 2⁶³−1 as it is parsed: one
// line naming the flag, exit 2. `generate --max-new-tokens 9223372036854775807` panicked in
// models/generate (prompt + new tokens overflowed the context check), `score --gen`, `eval mult
// --max-new-tokens`, grpo's --max-completion-length and ppo's --response-length with it.
func TestIntFlags_HugeValuesRefusedByName(t *testing.T) {
	flags := intFlags(newApp(), nil)
	if len(flags) < 100 {
		t.Fatalf("found %d integer flags in the command tree, want every command's (over 200)", len(flags))
	}
	for _, f := range flags {
		if f.seed {
			if f.name != "seed" {
				t.Errorf("%s --%s: only seeds may be unbounded", strings.Join(f.path, " "), f.name)
			}
			continue
		}
		for _, v := range []string{"2147483648", "9223372036854775807", "-9223372036854775808"} {
			args := append(slices.Clone(f.path), "--"+f.name+"="+v)
			rc, stderr := runFiles(t, args...)
			if rc != 2 || !oneLine(stderr, f.name) || !strings.Contains(stderr, "16777216") {
				t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line naming -%s and the bound 16777216", strings.Join(args, " "), rc, stderr, f.name)
			}
		}
	}
}

// The lengths that reach the generator, at 0, −1, 2³¹ and 2⁶³−1 and at the bound, on a real
// checkpoint: an error naming the flag (or max_position_embeddings for the bound itself), or a
// run; never a panic.
func TestIntFlags_GeneratorLengthsAtExtremes(t *testing.T) {
	tk := initTinyWithTokenizer(t)
	score := []string{"score", "--model", filepath.Join(tinyFixture, "model"), "--input", filepath.Join(tinyFixture, "inputs", "single.json")}
	for _, c := range []struct {
		base    []string
		flag    string
		ok      []string // values that run
		context bool     // a length the context bounds: 16777216 is refused naming max_position_embeddings
	}{
		{[]string{"generate", "--model", tk, "--prompt", "x"}, "max-new-tokens", []string{"1"}, true},
		{[]string{"generate", "--model", tk, "--prompt", "x", "--max-new-tokens", "1"}, "top-k", []string{"0", "1"}, false},
		{score, "gen", []string{"0", "1"}, true},
		{[]string{"eval", "mult", "--model", tk, "--n", "1", "--batch", "1"}, "max-new-tokens", []string{"1"}, true},
		{[]string{"eval", "mult", "--model", tk, "--n", "1", "--max-new-tokens", "1"}, "batch", []string{"1"}, false},
		{[]string{"eval", "mult", "--model", tk, "--batch", "1", "--max-new-tokens", "1"}, "n", []string{"1"}, false},
	} {
		values := []string{"0", "-1", "1", "2147483648", "9223372036854775807"}
		if c.context {
			values = append(values, "16777216")
		}
		for _, v := range values {
			args := append(slices.Clone(c.base), "--"+c.flag, v)
			rc, stderr := runFiles(t, args...)
			switch {
			case slices.Contains(c.ok, v):
				if rc != 0 {
					t.Errorf("%v: exit %d (%q), want a run", args, rc, stderr)
				}
			case v == "16777216":
				if rc != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "exceed max_position_embeddings") {
					t.Errorf("%v: exit %d, stderr %q; want one line naming max_position_embeddings", args, rc, stderr)
				}
			default:
				if rc == 0 || !oneLine(stderr, c.flag) {
					t.Errorf("%v: exit %d, stderr %q; want a non-zero exit and one line naming -%s", args, rc, stderr, c.flag)
				}
			}
		}
	}
}

// GRPO's max_completion_length and PPO's response_length are checked against the model's
// max_position_embeddings (512 here) when the trainer is built, before a graph is compiled or a file
// written (PPO compiled graphs sized by it; GRPO failed at its first generation, the output
// directory already started).
func TestIntFlags_RLCompletionLengthAgainstContext(t *testing.T) {
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
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"grpo", "--reward", "mult_correct", "--num-generations", "4", "--per-device-train-batch-size", "8", "--max-completion-length", "4096"},
			"max_completion_length (--max-completion-length) 4096 + the longest prompt's "},
		{[]string{"ppo", "--reward-model", rm, "--per-device-train-batch-size", "2", "--response-length", "4096"},
			"response_length (--response-length) 4096 + the longest prompt's "},
	} {
		out := filepath.Join(dir, c.args[0])
		rc, stderr := runFiles(t, append(c.args, "--model", model, "--dataset", "mult", "--output-dir", out, "--max-steps", "1")...)
		if rc != 1 || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "exceed the model's max_position_embeddings") {
			t.Errorf("%v: exit %d, stderr %q; want exit 1 and one line containing %q", c.args, rc, stderr, c.want)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v; want nothing written", out, err)
		}
	}
}

// Sizes bounded one by one still multiply: the bench commands refuse a batch of more than 2²⁴
// tokens before allocating it (`bench inputs --rows 16777216 --len 16777216` ran out of memory),
// and each entry of a --batch list is bounded as an integer flag is.
func TestIntFlags_BenchTokenProductsBounded(t *testing.T) {
	model := filepath.Join(tinyFixture, "model")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "inputs", "--vocab", "10", "--rows", "16777216", "--len", "16777216"}, "--rows × --len is more than 16777216 tokens"},
		{[]string{"bench", "decode", "--model", model, "--batch", "1,9223372036854775807"}, "--batch: 9223372036854775807 is more than 16777216"},
		{[]string{"bench", "decode", "--model", model, "--batch", "4096", "--prompt-len", "4096"}, "--batch × (--prompt-len + --new-tokens) is more"},
		{[]string{"bench", "sft", "--model", model, "--batch", "65536", "--seq-len", "65536"}, "--batch × --seq-len is more"},
		{[]string{"bench", "grpo", "--model", model, "--prompts", "4096", "--generations", "4096"}, "--prompts × --generations × (--prompt-len + --new-tokens) is more"},
		{[]string{"bench", "sample", "--model", model, "--rows", "16777216"}, "--rows × (--prompt-len + --new-tokens) is more"},
	} {
		rc, stdout, stderr := runFilesOut(t, c.args...)
		if rc != 2 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", c.args, rc, stdout, stderr, c.want)
		}
	}
}

// zeroSweepBase are the arguments a command of the 0 and −1 sweep runs with (its required inputs,
// and shorter runs where its defaults take seconds); the flag under test comes after them and
// wins. zeroSweepSkip are the commands left to other tests, with why.
var (
	zeroSweepBase = map[string][]string{
		"toy cartpole-dqn": {"--total-steps", "300", "--learning-starts", "100", "--print-every", "100"},
		"toy cartpole-ppo": {"--iterations", "1", "--num-steps", "64", "--minibatch-size", "32"},
		"tokenizer-train":  {"--demo", "--vocab-size", "300"},
		"data mult":        {"--kind", "sft", "-n", "4"},
		"bench inputs":     {"--vocab", "16", "--rows", "2", "--len", "8"},
	}
	zeroSweepSkip = map[string]string{
		"demo":  "TestIntFlags_ZeroAndMinusOneWithInputs",
		"bench": "TestIntFlags_ZeroAndMinusOneWithInputs (bench inputs is swept here)",
		"sft":   "TestValidate_IntegerOptionsAtExtremes sweeps every trainer option",
		"dpo":   "as sft", "kto": "as sft", "grpo": "as sft", "ppo": "as sft", "reward": "as sft",
		"generate": "TestIntFlags_GeneratorLengthsAtExtremes", "score": "as generate", "eval": "as generate",
		"score-reward": "TestIntFlags_ZeroAndMinusOneWithInputs",
		"plot":         "TestIntFlags_ZeroAndMinusOneWithInputs",
	}
)

// 0 and −1 on every integer flag of the commands that run in a moment (the toys, tokenizer-train,
// data mult, bench inputs), found in the command tree: a run, or one line and exit 1 or 2; never
// a panic.
func TestIntFlags_ZeroAndMinusOne(t *testing.T) {
	dir := t.TempDir()
	swept := 0
	for _, f := range intFlags(newApp(), nil) {
		path := strings.Join(f.path, " ")
		if _, skip := zeroSweepSkip[path]; skip || zeroSweepSkip[f.path[0]] != "" && zeroSweepBase[path] == nil {
			continue
		}
		base := slices.Clone(f.path)
		base = append(base, zeroSweepBase[path]...)
		if path == "tokenizer-train" {
			base = append(base, "--output", filepath.Join(dir, "tok-"+f.name))
		}
		for _, v := range []string{"0", "-1"} {
			args := append(slices.Clone(base), "--"+f.name+"="+v)
			rc, stderr := runFiles(t, args...)
			if rc != 0 && (rc > 2 || strings.Count(stderr, "\n") != 1) {
				t.Errorf("%s: exit %d, stderr %q; want a run, or exit 1 or 2 with one line", strings.Join(args, " "), rc, stderr)
			}
			swept++
		}
	}
	if swept < 150 {
		t.Errorf("swept %d runs, want every integer flag of the toys and the quick commands", swept)
	}
}

// 0 and −1 on every integer flag of the commands that need inputs made first or run longer at
// their defaults: the demo (at a tiny size, its RLHF flags with --rlhf), the model-timing bench
// workloads, score-reward and plot. The same rule: a run, or one line and exit 1 or 2; never a
// panic.
func TestIntFlags_ZeroAndMinusOneWithInputs(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	rm := filepath.Join(dir, "rm")
	prefs := multData(t, dir, "dpo", "4")
	if _, err := runCLI(t, "reward", "--model", model, "--dataset", prefs, "--output-dir", rm, "--max-steps", "1", "--per-device-train-batch-size", "2"); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	writeRunMetrics(t, run)
	input := filepath.Join(tinyFixture, "inputs", "single.json")
	tinyDemo := []string{"--sft-steps", "1", "--grpo-steps", "1", "--hidden-size", "16", "--intermediate-size", "32", "--layers", "1",
		"--held-out", "4", "--max-factor", "4", "--sft-batch", "2", "--num-generations", "2", "--grpo-prompts", "1"}
	rlhf := []string{"--rlhf", "--rm-steps", "1", "--rm-batch", "2", "--ppo-updates", "1", "--ppo-prompts", "1", "--ppo-epochs", "1"}
	bases := map[string][]string{
		"bench decode": {"--model", model, "--batch", "1", "--prompt-len", "4", "--new-tokens", "2"},
		"bench sft":    {"--model", model, "--batch", "2", "--seq-len", "8", "--steps", "1", "--warmup", "0"},
		"bench grpo":   {"--model", model, "--prompts", "1", "--generations", "2", "--prompt-len", "4", "--new-tokens", "2", "--micro-batch", "2"},
		"bench sample": {"--model", model, "--rows", "1", "--prompt-len", "2", "--new-tokens", "2"},
		"bench parity": {"--model", model, "--input", input, "--steps", "1"},
		"score-reward": {"--model", rm, "--text", "7×8 is 56"},
		"plot":         {run, "-o", filepath.Join(dir, "curves.png")},
	}
	swept := 0
	for _, f := range intFlags(newApp(), nil) {
		path := strings.Join(f.path, " ")
		base, ok := bases[path]
		if path == "demo" {
			base, ok = append(slices.Clone(tinyDemo), "--output-dir", filepath.Join(dir, "demo-"+f.name)), true
			if strings.HasPrefix(f.name, "rm-") || strings.HasPrefix(f.name, "ppo-") {
				base = append(base, rlhf...)
			}
		}
		if !ok {
			continue
		}
		for _, v := range []string{"0", "-1"} {
			args := append(append(slices.Clone(f.path), base...), "--"+f.name+"="+v)
			if path == "plot" { // plot takes its run directories last
				args = append(append(slices.Clone(f.path), "--"+f.name+"="+v), base...)
			}
			rc, stderr := runFiles(t, args...)
			if rc != 0 && (rc > 2 || strings.Count(stderr, "\n") != 1) {
				t.Errorf("%s: exit %d, stderr %q; want a run, or exit 1 or 2 with one line", strings.Join(args, " "), rc, stderr)
			}
			swept++
		}
	}
	if swept < 60 {
		t.Errorf("swept %d runs, want every integer flag of the demo, the bench workloads, score-reward and plot", swept)
	}
	t.Logf("swept %d runs", swept)
}
