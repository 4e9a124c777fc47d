package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/gguf"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// llamaCppGolden is models/gguf/testdata/export/llamacpp_logprobs.json
// (scripts/reference/gguf_export_check.py, llama-cpp-python 0.3.36).
type llamaCppGolden struct {
	Tokens []int `json:"tokens"`
	Files  map[string]map[string]struct {
		SHA256    string    `json:"gguf_sha256"`
		LogProbs  []float64 `json:"llamacpp_logprobs"`
		Tensors   int       `json:"tensors"`
		Differing []string  `json:"differing"`
	} `json:"files"`
}

// llamaCppBounds are the largest |llama.cpp − posttrain| log-prob differences allowed per --type,
// posttrain scoring the original float32 checkpoint: 1e-2 for f16 (the bound; measured
// 3.7e-3), and for the quantised types what their error on these tiny random models comes to
// (measured 0.16 and 0.48): those two mostly record that llama.cpp runs the files at all.
var llamaCppBounds = map[string]float64{"f16": 1e-2, "q8_0": 0.25, "q4_k_m": 0.75}

// llama.cpp (llama-cpp-python 0.3.36) loads what `posttrain export gguf` writes and computes the
// log-probs posttrain computes: for every tiny fixture GGUF can carry, the file exported now is
// the one the golden was made from (sha256), and the golden's llama.cpp log-probs of a 16-token
// batch are within llamaCppBounds of `posttrain score` on the original checkpoint. The golden
// also records that llama-quantize's Q4_K_M of the f16 export equals posttrain's q4_k_m of the same
// weights tensor for tensor.
func TestExport_LlamaCppLogProbs(t *testing.T) {
	data, err := os.ReadFile("../../models/gguf/testdata/export/llamacpp_logprobs.json")
	if err != nil {
		t.Fatal(err)
	}
	var g llamaCppGolden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	batch := filepath.Join(t.TempDir(), "batch.json")
	ids, _ := json.Marshal(map[string]any{"input_ids": [][]int{g.Tokens}, "completion_start": 1})
	if err := os.WriteFile(batch, ids, 0o644); err != nil {
		t.Fatal(err)
	}
	for fx, files := range g.Files {
		dir := looptest.Fixture(t, fx)
		out, err := runCLI(t, "score", "--model", dir, "--input", batch)
		if err != nil {
			t.Fatal(err)
		}
		var rep struct {
			TokenLogProbs [][]float64 `json:"token_logprobs"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for _, typ := range gguf.ExportTypeNames {
			want, ok := files[typ]
			if !ok {
				continue
			}
			path := filepath.Join(t.TempDir(), fx+"."+typ+".gguf")
			if _, err := runCLI(t, "export", "gguf", "--model", dir, "--out", path, "--type", typ); err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if s := sha256.Sum256(raw); hex.EncodeToString(s[:]) != want.SHA256 {
				t.Errorf("%s %s: the export changed since the llama.cpp golden was made; rerun scripts/reference/gguf_export_check.py", fx, typ)
				continue
			}
			var worst float64
			for i, lp := range rep.TokenLogProbs[0] {
				worst = math.Max(worst, math.Abs(lp-want.LogProbs[i]))
			}
			t.Logf("%s %s: max |llama.cpp − posttrain| = %.3g", fx, typ, worst)
			if worst > llamaCppBounds[typ] {
				t.Errorf("%s %s: llama.cpp's log-probs differ from posttrain's by %.3g (> %g)", fx, typ, worst, llamaCppBounds[typ])
			}
		}
		if q, ok := files["llama_quantize"]; ok && (len(q.Differing) > 0 || q.Tensors == 0) {
			t.Errorf("%s: llama-quantize's Q4_K_M differs from posttrain's in %v", fx, q.Differing)
		}
	}
	if len(g.Files) < 5 {
		t.Errorf("golden has %d fixtures, want 5", len(g.Files))
	}
}

// `export gguf --adapter` writes the GGUF of what `posttrain merge` writes (the same tensors byte
// for byte); the Modelfile beside it has the ChatML TEMPLATE and the stop tokens; bad input is one
// line naming the flag or file, exit status 2 for a bad --type and 1 otherwise, and nothing is
// left at --out.
func TestExport_CLI(t *testing.T) {
	base := looptest.Fixture(t, "qwen2-tiny")
	adapter := "../../models/testdata/peft-0.21.2/posttrain-sft/adapter"
	dir := t.TempDir()
	direct := filepath.Join(dir, "direct.gguf")
	if _, err := runCLI(t, "export", "gguf", "--model", base, "--adapter", adapter, "--out", direct, "--type", "q8_0"); err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	if _, err := runCLI(t, "merge", "--model", base, "--adapter", adapter, "--output-dir", merged); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "via-merge.gguf")
	if _, err := runCLI(t, "export", "gguf", "--model", merged, "--out", other, "--type", "q8_0"); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain.gguf")
	if _, err := runCLI(t, "export", "gguf", "--model", base, "--out", plain, "--type", "q8_0"); err != nil {
		t.Fatal(err)
	}
	a, b, c := tensorBytes(t, direct), tensorBytes(t, other), tensorBytes(t, plain)
	if !bytes.Equal(a, b) {
		t.Error("export --adapter differs from merge then export")
	}
	if bytes.Equal(a, c) {
		t.Error("the adapter changed nothing: the test cannot tell")
	}
	mf, err := os.ReadFile(filepath.Join(dir, "direct.Modelfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM ./direct.gguf\n", "TEMPLATE \"\"\"", "<|im_start|>{{ .Role }}", "PARAMETER stop \"<|im_end|>\"\n", "PARAMETER stop \"<|im_start|>\"\n"} {
		if !strings.Contains(string(mf), want) {
			t.Errorf("Modelfile lacks %q:\n%s", want, mf)
		}
	}
	odd := looptest.Fixture(t, "qwen3-tiny")
	tcPath := filepath.Join(odd, "tokenizer_config.json")
	tc, err := os.ReadFile(tcPath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(tc, &m); err != nil {
		t.Fatal(err)
	}
	m["chat_template"] = "{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
	if tc, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tcPath, tc, 0o644); err != nil {
		t.Fatal(err)
	}
	said, err := runCLI(t, "export", "gguf", "--model", odd, "--out", filepath.Join(t.TempDir(), "odd.gguf"))
	if err != nil || !strings.Contains(said, "the chat template has no known ollama form") {
		t.Errorf("an unknown chat template: %q, %v", said, err)
	}
	smol := looptest.Fixture(t, "smollm3-tiny")
	for _, c := range []struct {
		args []string
		rc   int
		want string
	}{
		{[]string{"--model", base, "--type", "q5_k"}, 2, `--type "q5_k" is not supported (valid: f16, bf16, q8_0, q4_k_m)`},
		{[]string{"--model", filepath.Join(dir, "missing")}, 1, "--model " + filepath.Join(dir, "missing") + ": model " + filepath.Join(dir, "missing") + ": no such directory"},
		{[]string{"--model", smol}, 1, `model_type "smollm3" cannot be exported to GGUF (supported: gemma3_text, llama, qwen2, qwen3)`},
		{[]string{"--model", looptest.Fixture(t, "gemma3-tiny")}, 1, "query_pre_attn_scalar 24 cannot be exported"},
		{[]string{"--model", base, "--adapter", filepath.Join(dir, "nope")}, 1, "--adapter " + filepath.Join(dir, "nope") + ": not a directory"},
	} {
		out := filepath.Join(t.TempDir(), "x.gguf")
		rc, stderr := runFiles(t, append([]string{"export", "gguf", "--out", out}, c.args...)...)
		if rc != c.rc || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: rc %d, stderr %q; want rc %d and one line with %q", c.args, rc, stderr, c.rc, c.want)
		}
		if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) > 0 {
			t.Errorf("%v: left %v at --out's directory", c.args, entries[0].Name())
		}
	}
}

// tensorBytes is the data section of a GGUF: every tensor's bytes, in order.
func tensorBytes(t *testing.T, path string) []byte {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []byte
	for i := range f.Tensors {
		raw, err := f.Raw(&f.Tensors[i])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, raw...)
	}
	return out
}

// export gguf never replaces what it reads, nor a file it did not write without --overwrite, nor
// anything that is not a regular file; a refusal is one line and leaves every file as it was.
func TestExport_OutputsNeverReplaceInputs(t *testing.T) {
	base := copyDir(t, looptest.Fixture(t, "qwen2-tiny"), filepath.Join(t.TempDir(), "model"))
	adapter := copyDir(t, "../../models/testdata/peft-0.21.2/posttrain-sft/adapter", filepath.Join(t.TempDir(), "adapter"))
	dir := t.TempDir()
	existing := filepath.Join(dir, "mine.gguf")
	userModelfile := filepath.Join(dir, "theirs.Modelfile")
	for path, text := range map[string]string{existing: "not posttrain's", userModelfile: "FROM elsewhere\n"} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dangling := filepath.Join(dir, "dangling.gguf")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain.gguf")
	if _, err := runCLI(t, "export", "gguf", "--model", base, "--out", plain, "--type", "q8_0"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("POSTTRAIN_GGUF_CACHE", t.TempDir())
	before := filesOf(t, base, adapter, dir, filepath.Dir(plain))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", base, "--out", filepath.Join(base, "model.safetensors"), "--overwrite"}, "is inside the model (--model)"},
		{[]string{"--model", base, "--out", filepath.Join(base, "new.gguf")}, "is inside the model (--model)"},
		{[]string{"--model", base, "--adapter", adapter, "--out", filepath.Join(adapter, "adapter_model.safetensors"), "--overwrite"}, "is inside the adapter (--adapter)"},
		{[]string{"--model", plain, "--out", plain, "--overwrite"}, "is the model file (--model)"},
		{[]string{"--model", base, "--out", existing}, "--out " + existing + " exists: pass --overwrite to replace it"},
		{[]string{"--model", base, "--out", filepath.Join(dir, "theirs.gguf")}, "the Modelfile " + userModelfile + " exists: pass --overwrite"},
		{[]string{"--model", base, "--out", dangling, "--overwrite"}, "is a symbolic link"},
		{[]string{"--model", base, "--out", "/dev/null", "--overwrite"}, "--out /dev/null is not a regular file"},
		{[]string{"--model", base, "--out", ""}, "--out is empty"},
		{[]string{"--model", filepath.Join(dir, "absent.gguf"), "--out", filepath.Join(dir, "x.gguf")}, "no such file"},
	} {
		rc, stderr := runFiles(t, append([]string{"export", "gguf"}, c.args...)...)
		if rc != 1 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("%v: rc %d, stderr %q; want rc 1 and one line with %q", c.args, rc, stderr, c.want)
		}
		if after := filesOf(t, base, adapter, dir, filepath.Dir(plain)); !maps.Equal(before, after) {
			t.Fatalf("%v: the files changed:\nbefore %v\nafter  %v", c.args, before, after)
		}
	}
	// With consent, the GGUF and its Modelfile are replaced together.
	if _, err := runCLI(t, "export", "gguf", "--model", base, "--out", existing, "--type", "q8_0", "--overwrite"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tensorBytes(t, existing), tensorBytes(t, plain)) {
		t.Error("--overwrite did not write the export")
	}
	if mf, err := os.ReadFile(filepath.Join(dir, "mine.Modelfile")); err != nil || !strings.Contains(string(mf), "FROM ./mine.gguf\n") {
		t.Errorf("mine.Modelfile: %q, %v", mf, err)
	}
	if got, _ := os.ReadFile(userModelfile); string(got) != "FROM elsewhere\n" {
		t.Errorf("another GGUF's Modelfile changed: %q", got)
	}
}

// filesOf maps every regular file under dirs to its size and contents' hash (symbolic links to
// their targets).
func filesOf(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			if e.Type()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(path)
				out[path] = "→" + target
				return err
			}
			b, err := os.ReadFile(path)
			out[path] = fmt.Sprintf("%d:%x", len(b), sha256.Sum256(b))
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
