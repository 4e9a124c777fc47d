package main

import (
	"encoding/binary"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/safetensors"
)

// nanCopy copies the checkpoint directory src with its final norm's weights set to NaN: every
// logit it computes is NaN.
func nanCopy(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "nan")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".safetensors") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tensors, err := safetensors.ReadModelDir(src)
	if err != nil {
		t.Fatal(err)
	}
	norm := tensors["model.norm.weight"]
	if norm == nil || norm.DType != "F32" {
		t.Fatalf("%s: no float32 model.norm.weight", src)
	}
	norm.Data = slices.Clone(norm.Data)
	for i := 0; i < len(norm.Data); i += 4 {
		binary.LittleEndian.PutUint32(norm.Data[i:], math.Float32bits(float32(math.NaN())))
	}
	names := slices.Sorted(maps.Keys(tensors))
	list := make([]*safetensors.Tensor, 0, len(names))
	for _, name := range names {
		list = append(list, tensors[name])
	}
	if err := safetensors.WriteModelDir(dst, list, 0); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A model whose logits are NaN stops generate, score, score --gen and eval mult with one line
// naming the token (row, position or new-token index, id), exit 1: generate printed an empty line
// and exited 0, score failed with encoding/json's "unsupported value: NaN" alone.
func TestNonFiniteLogits_Named(t *testing.T) {
	tk := nanCopy(t, initTinyWithTokenizer(t))
	fixture := nanCopy(t, filepath.Join(tinyFixture, "model"))
	input := filepath.Join(tinyFixture, "inputs", "single.json")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"generate", "--model", tk, "--prompt", "x", "--max-new-tokens", "2"}, "prompt 0, new token 0 (id "},
		{[]string{"generate", "--model", tk, "--prompt", "x", "--max-new-tokens", "2", "--json"}, "prompt 0, new token 0 (id "},
		{[]string{"generate", "--model", tk, "--prompt", "x", "--max-new-tokens", "2", "--temperature", "1"}, "prompt 0, new token 0 (id "},
		{[]string{"score", "--model", fixture, "--input", input}, "row 0, position 1 (token 17): log-prob NaN: the model's logits are not finite"},
		{[]string{"eval", "mult", "--model", tk, "--n", "2", "--max-new-tokens", "2"}, "prompt 0, new token 0 (id "},
	} {
		rc, stdout, stderr := runFilesOut(t, c.args...)
		if rc != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) ||
			strings.Contains(stderr, "json:") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1, no output and one line containing %q", c.args, rc, stdout, stderr, c.want)
		}
	}
}
