package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/jsondiff"
)

// The corridor experiments' reference files live with the package that computes them
// (toy/corridor/testdata, copied from the course; see its README.md).
var corridorTestdata = filepath.Join("..", "..", "toy", "corridor", "testdata")

var corridorToys = []struct {
	phase int
	name  string
}{{1, "return"}, {2, "bellman"}, {3, "qlearning"}, {4, "dqn"}, {5, "reinforce"}, {6, "a2c"}, {7, "ppo"}}

// runApp runs the CLI in-process and returns what it wrote to stdout.
func runApp(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, io.Discard
	err := app.Run(context.Background(), append([]string{"posttrain"}, args...))
	return out.String(), err
}

// readTestdata returns the file name under dir (corridorTestdata, tinylmTestdata); a missing file
// fails the test.
func readTestdata(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// `posttrain toy <name>` prints the phase's course lines byte for byte at the default flags.
func TestToyCorridor_PrintsCourseLines(t *testing.T) {
	for _, tc := range corridorToys {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runApp(t, "toy", tc.name)
			if err != nil {
				t.Fatal(err)
			}
			if want := readTestdata(t, corridorTestdata, fmt.Sprintf("expected/phase%02d.txt", tc.phase)); got != want {
				t.Errorf("toy %s printed\n%s\nwant\n%s", tc.name, got, want)
			}
		})
	}
}

// `--json` prints one object with exactly the golden's keys, numbers within 1e-12.
func TestToyCorridor_JSONMatchesGolden(t *testing.T) {
	for _, tc := range corridorToys {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runApp(t, "toy", tc.name, "--json")
			if err != nil {
				t.Fatal(err)
			}
			if strings.Count(out, "\n") != 1 {
				t.Errorf("--json printed %d lines, want one", strings.Count(out, "\n"))
			}
			var got, want any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("--json output is not JSON: %v\n%s", err, out)
			}
			if err := json.Unmarshal([]byte(readTestdata(t, corridorTestdata, fmt.Sprintf("golden/phase%02d.json", tc.phase))), &want); err != nil {
				t.Fatal(err)
			}
			for _, d := range jsondiff.Diff("", got, want, 1e-12) {
				t.Error(d)
			}
		})
	}
}

// `toy course` starts with phases 1-7's lines, in order (later phases may follow).
func TestToyCourse_StartsWithCorridorPhases(t *testing.T) {
	got, err := runApp(t, "toy", "course")
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for _, tc := range corridorToys {
		want.WriteString(readTestdata(t, corridorTestdata, fmt.Sprintf("expected/phase%02d.txt", tc.phase)))
	}
	if !strings.HasPrefix(got, want.String()) {
		t.Errorf("toy course printed\n%s\nwant it to start with\n%s", got, want.String())
	}
}

// Other settings run, and --json reports them under the course's snake_case names.
func TestToyCorridor_NonDefaultFlags(t *testing.T) {
	out, err := runApp(t, "toy", "return", "--p", "0.3, 1", "--episodes", "50", "--demo-seeds", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Args  map[string]any     `json:"args"`
		J     map[string]float64 `json:"J"`
		Demos []any              `json:"demo_episodes"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if p := fmt.Sprint(got.Args["p"]); p != "[0.3 1]" || got.Args["episodes"] != 50.0 || got.Args["demo_seeds"] != 1.0 {
		t.Errorf("args = %v", got.Args)
	}
	if _, ok := got.J["0.3"]; !ok || math.Abs(got.J["1.0"]-0.9) > 1e-12 || len(got.Demos) != 1 {
		t.Errorf("J = %v, %d demos; want keys 0.3 and 1.0 (= 0.9), 1 demo", got.J, len(got.Demos))
	}
	out, err = runApp(t, "toy", "dqn", "--steps", "300", "--hidden", "4", "--batch-size", "8")
	if err != nil || strings.Count(out, "\n") != 5 {
		t.Errorf("toy dqn with other flags: err %v, output\n%s", err, out)
	}
}

// Bad values fail with a usage error (exit status 2) naming the flag.
func TestToyCorridor_BadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"return", "--p", "0.5,x"}, "--p"},
		{[]string{"return", "--p", "2"}, "--p must be in [0, 1]"},
		{[]string{"bellman", "--gamma", "-1"}, "--gamma"},
		{[]string{"qlearning", "--epsilon", "1.5"}, "--epsilon"},
		{[]string{"dqn", "--batch-size", "0"}, "--batch-size"},
		{[]string{"reinforce", "--state", "4"}, "--state must be a non-terminal cell 1, 2 or 3"},
		{[]string{"a2c", "--lam", "x"}, "lam"},
		{[]string{"ppo", "--epochs", "0"}, "--epochs"},
		{[]string{"ppo", "extra"}, "unexpected argument"},
	} {
		_, err := runApp(t, append([]string{"toy"}, tc.args...)...)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("toy %v: got error %v, want a usage error containing %q", tc.args, err, tc.want)
		}
	}
}
