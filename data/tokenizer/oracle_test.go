//go:build oracle

package tokenizer

// Comparison with HuggingFace tokenizers itself (testdata/oracle: Node and `npm install` there).
//   go test -tags oracle -run TestOracle_Fuzz ./data/tokenizer/           # SEED=n for other inputs
//   UPDATE_GOLDEN=1 go test -tags oracle -run TestOracle_UpdateGolden ./data/tokenizer/
// (new inputs for hf_fuzz.json.gz; make reference-tokenizers then recomputes the answers with the
// pinned Python tokenizers and transformers)

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// runOracle writes texts and id sequences as JSON lines, runs testdata/oracle/oracle.js on them
// and returns HuggingFace's answers in the same order.
func runOracle(t *testing.T, texts []string, idSeqs [][]int) ([]hfEncoded, []hfDecoded) {
	t.Helper()
	lines := runOracleLines(t, "testdata/tokenizer.json.gz", texts, idSeqs)
	encs := make([]hfEncoded, len(texts))
	decs := make([]hfDecoded, len(idSeqs))
	for i := range encs {
		encs[i].Text = texts[i]
		if err := json.Unmarshal([]byte(lines[i]), &encs[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := range decs {
		decs[i].IDs = idSeqs[i]
		if err := json.Unmarshal([]byte(lines[len(texts)+i]), &decs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return encs, decs
}

// runOracleLines runs oracle.js on the tokenizer.json file and returns its output lines: one per
// text, then one per id sequence.
func runOracleLines(t *testing.T, file string, texts []string, idSeqs [][]int) []string {
	t.Helper()
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out.jsonl")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, s := range texts {
		enc.Encode(map[string]string{"text": s})
	}
	for _, ids := range idSeqs {
		enc.Encode(map[string][]int{"ids": ids})
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	cmd := exec.Command("node", "testdata/oracle/oracle.js", file, in, out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oracle: %v\n%s(run `npm install` in testdata/oracle)", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != len(texts)+len(idSeqs) {
		t.Fatalf("oracle answered %d lines for %d inputs", len(lines), len(texts)+len(idSeqs))
	}
	return lines
}

// TestOracle_Fuzz compares this package with HuggingFace on fresh random inputs.
func TestOracle_Fuzz(t *testing.T) {
	tok, _ := testTokenizer(t)
	seed, _ := strconv.Atoi(os.Getenv("SEED"))
	texts, idSeqs := fuzzInputs(uint64(seed)+1000, 30000, 10000)
	encs, decs := runOracle(t, texts, idSeqs)
	checkAgainstHF(t, tok, encs, decs)
}

// TestOracle_UpdateGolden rewrites testdata/hf_fuzz.json.gz (read by TestEncode_HFFuzz).
func TestOracle_UpdateGolden(t *testing.T) {
	if os.Getenv("UPDATE_GOLDEN") == "" {
		t.Skip("set UPDATE_GOLDEN=1 to rewrite testdata/hf_fuzz.json.gz")
	}
	texts, idSeqs := fuzzInputs(0, 3000, 1500)
	encs, decs := runOracle(t, texts, idSeqs)
	writeHFFuzz(t, hfFuzzFile{
		Meta: map[string]string{
			"generator": "UPDATE_GOLDEN=1 go test -tags oracle -run TestOracle_UpdateGolden ./data/tokenizer/ (fuzzInputs seed 0)",
			"oracle":    "HuggingFace tokenizers (npm) 0.23.2 via testdata/oracle/oracle.js on testdata/tokenizer.json.gz",
		},
		Encode: encs, Decode: decs,
	})
}
