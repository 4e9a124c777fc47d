package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const tinyFixture = "../../models/testdata/qwen2-tiny"

// runCLI runs posttrain in-process with args and returns what it printed.
func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(context.Background(), append([]string{"posttrain"}, args...))
	return out.String(), err
}

// compareJSON checks that every key of want is in got with numbers within tol (relative for
// numbers above 1 in magnitude) and everything else equal; keys only in got are not checked here.
func compareJSON(t *testing.T, path string, got, want any, tol float64) {
	t.Helper()
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			t.Errorf("%s: got %T, want an object", path, got)
			return
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				t.Errorf("%s.%s: missing", path, k)
				continue
			}
			compareJSON(t, path+"."+k, gv, wv, tol)
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			t.Errorf("%s: got %v, want %v", path, got, want)
			return
		}
		for i := range w {
			compareJSON(t, path+"["+strconv.Itoa(i)+"]", g[i], w[i], tol)
		}
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > tol*math.Max(1, math.Abs(w)) {
			t.Errorf("%s: got %v, want %v", path, got, w)
		}
	default:
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v, want %v", path, got, want)
		}
	}
}

// scoreFixture runs `posttrain score` on the qwen2-tiny input name with extra flags and returns its
// JSON output and the float64 reference file of that input.
func scoreFixture(t *testing.T, name string, flags ...string) (got, want map[string]any) {
	t.Helper()
	args := append([]string{"score", "--model", filepath.Join(tinyFixture, "model"),
		"--input", filepath.Join(tinyFixture, "inputs", name+".json")}, flags...)
	out, err := runCLI(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	data, err := os.ReadFile(filepath.Join(tinyFixture, "expected", name+".float64.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	return got, want
}

// The printed JSON has the keys of the expected files and their values (float64 reference).
func TestScore_CLIMatchesExpected(t *testing.T) {
	keys := []string{"token_positions", "token_ids", "token_logprobs", "seq_logprob", "n_completion_tokens", "loss",
		"last_index", "last_logits_first8", "last_argmax", "logits_checksum", "grad"}
	for _, name := range []string{"left_pad", "right_pad", "single"} {
		t.Run(name, func(t *testing.T) {
			got, full := scoreFixture(t, name, "--grad")
			want := map[string]any{}
			for _, k := range keys {
				want[k] = full[k]
			}
			grad := full["grad"].(map[string]any)
			want["grad"] = map[string]any{"l2": grad["l2"], "global_l2": grad["global_l2"]}
			compareJSON(t, name, got, want, 1e-4)
			var gotKeys []string
			for k := range got {
				gotKeys = append(gotKeys, k)
			}
			sort.Strings(gotKeys)
			sort.Strings(keys)
			if !reflect.DeepEqual(gotKeys, keys) {
				t.Errorf("keys: got %v, want %v", gotKeys, keys)
			}
		})
	}
}

func TestScore_CLIErrors(t *testing.T) {
	model := filepath.Join(tinyFixture, "model")
	input := filepath.Join(tinyFixture, "inputs", "single.json")
	for _, c := range []struct {
		args  []string
		want  string
		usage bool
	}{
		{[]string{"score", "--model", model, "--input", input, "--compute-dtype", "float16"}, "valid: float32, bfloat16", true},
		{[]string{"score", "--model", t.TempDir(), "--input", input}, "config.json", false},
		{[]string{"score", "--model", model, "--input", "nonexistent.json"}, "nonexistent.json", false},
		{[]string{"score", "--model", model, "--input", input, "--backend", "tpu"}, "valid:", false},
	} {
		_, err := runCLI(t, c.args...)
		var ue usageError
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &ue) != c.usage {
			t.Errorf("%v: want an error containing %q (usage error: %v), got %v", c.args, c.want, c.usage, err)
		}
	}
}
