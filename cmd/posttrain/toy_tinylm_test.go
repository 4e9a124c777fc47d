package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/jsondiff"
)

// The TinyLM reference files live with the oracle (toy/tinylm/testdata, copied from the course).
var tinylmTestdata = filepath.Join("..", "..", "toy", "tinylm", "testdata")

// phase → the commands whose outputs, concatenated, are the phase's course lines.
var tinylmToys = []struct {
	phase int
	names []string
}{{8, []string{"lm-reinforce"}}, {9, []string{"rlhf"}}, {10, []string{"dpo", "kto"}}, {11, []string{"grpo"}}, {12, []string{"variants"}}}

// `posttrain toy <name>` prints the course's lines byte for byte, trained through GoMLX.
func TestToyTinyLM_PrintsCourseLines(t *testing.T) {
	for _, tc := range tinylmToys {
		t.Run(fmt.Sprint(tc.phase), func(t *testing.T) {
			var got strings.Builder
			for _, name := range tc.names {
				out, err := runApp(t, "toy", name)
				if err != nil {
					t.Fatal(err)
				}
				got.WriteString(out)
			}
			if want := readTestdata(t, tinylmTestdata, fmt.Sprintf("phase%02d.txt", tc.phase)); got.String() != want {
				t.Errorf("toy %v printed\n%s\nwant\n%s", tc.names, got.String(), want)
			}
		})
	}
}

// `--json --check` prints the golden's keys (args included, null where the course passed None),
// numbers within 1e-12 of the course; --check also ran the oracle and agreed.
func TestToyTinyLM_JSONMatchesGolden(t *testing.T) {
	for _, tc := range tinylmToys {
		t.Run(fmt.Sprint(tc.phase), func(t *testing.T) {
			merged := map[string]any{}
			for _, name := range tc.names {
				out, err := runApp(t, "toy", name, "--json", "--check")
				if err != nil {
					t.Fatal(err)
				}
				if strings.Count(out, "\n") != 1 {
					t.Errorf("%s --json printed %d lines, want one", name, strings.Count(out, "\n"))
				}
				var got map[string]any
				if err := json.Unmarshal([]byte(out), &got); err != nil {
					t.Fatalf("%s --json output is not JSON: %v\n%s", name, err, out)
				}
				for k, v := range got {
					merged[k] = v
				}
			}
			var want any
			if err := json.Unmarshal([]byte(readTestdata(t, tinylmTestdata, fmt.Sprintf("phase%02d.json", tc.phase))), &want); err != nil {
				t.Fatal(err)
			}
			for _, d := range jsondiff.Diff("", merged, want, 1e-12) {
				t.Error(d)
			}
		})
	}
}

// Non-default flags reach the trainer (and --check still agrees); a later default run is unaffected.
func TestToyTinyLM_NonDefaultFlags(t *testing.T) {
	for _, args := range [][]string{
		{"grpo", "--iterations", "3", "--adv", "rloo", "--agg", "const", "--ratio", "sequence", "--eps-high", "0.28", "--num-generations", "4"},
		{"variants", "--iterations", "2", "--variants", "DAPO,GSPO", "--beta", "0.1"},
		{"dpo", "--epochs", "5", "--beta", "0.5"},
		{"kto", "--kto-epochs", "5", "--kto-lr", "0.5"},
		{"lm-reinforce", "--beta", "0.2", "--iterations", "3", "--seed", "7"},
		{"rlhf", "--iterations", "2", "--rm-epochs", "10", "--lam", "0.9"},
	} {
		out, err := runApp(t, append([]string{"toy"}, append(args, "--check", "--json")...)...)
		if err != nil {
			t.Fatalf("toy %v: %v", args, err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("toy %v: %v", args, err)
		}
		a := got["args"].(map[string]any)
		if key := strings.ReplaceAll(strings.TrimPrefix(args[1], "--"), "-", "_"); fmt.Sprint(a[key]) != args[2] {
			t.Errorf("toy %v: args = %v, want %s = %s", args, a, args[1], args[2])
		}
	}
	out, err := runApp(t, "toy", "dpo")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(strings.SplitAfter(readTestdata(t, tinylmTestdata, "phase10.txt"), "\n")[:5], ""); out != want {
		t.Errorf("toy dpo after a non-default run printed\n%s\nwant\n%s", out, want)
	}
}

func TestToyTinyLM_BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"grpo", "--adv", "median"},
		{"grpo", "--agg", "sum"},
		{"grpo", "--ratio", "word"},
		{"grpo", "--num-generations", "1"},
		{"variants", "--variants", "PPO"},
		{"dpo", "--epochs", "0"},
		{"kto", "--kto-lr", "-1"},
		{"lm-reinforce", "--betas", "0.1,x"},
		{"rlhf", "--eps", "0"},
		{"grpo", "--trace", "33"},
		{"dpo", "--backend", "tpu"},
		{"dpo", "extra"},
	} {
		_, err := runApp(t, append([]string{"toy"}, args...)...)
		var ue usageError
		if err == nil || !errors.As(err, &ue) {
			t.Errorf("toy %v: err = %v, want a usage error", args, err)
		}
	}
}

// `posttrain toy course` prints all 74 lines of phases 1-12, the TinyLM ones trained through GoMLX.
func TestToyCourse_AllPhases(t *testing.T) {
	var want strings.Builder
	for p := 1; p <= 7; p++ {
		want.WriteString(readTestdata(t, corridorTestdata, fmt.Sprintf("expected/phase%02d.txt", p)))
	}
	for p := 8; p <= 12; p++ {
		want.WriteString(readTestdata(t, tinylmTestdata, fmt.Sprintf("phase%02d.txt", p)))
	}
	got, err := runApp(t, "toy", "course")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(got, "\n"); n != 74 {
		t.Errorf("toy course printed %d lines, want 74", n)
	}
	if got != want.String() {
		t.Errorf("toy course printed\n%s\nwant\n%s", got, want.String())
	}
}
