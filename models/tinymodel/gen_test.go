package tinymodel

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The committed files/tokenizer.json is the Qwen tokenizer fixture cut to its first NumMerges
// merges (ids < 256+NumMerges: the 256 byte tokens and the first merged pieces, in Qwen's own
// rank order, so it is a valid BPE of the same family) plus the three ChatML special tokens
// renumbered after them. UPDATE_GOLDEN=1 regenerates it; otherwise the test checks it.
func TestTokenizerFixture(t *testing.T) {
	f, err := os.Open("../../data/tokenizer/testdata/tokenizer.json.gz")
	if err != nil {
		t.Skipf("the Qwen tokenizer fixture is not available: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"tokenizer.json": derive(t, raw), "tokenizer_config.json": tokenizerConfig()} {
		path := filepath.Join("files", name)
		if os.Getenv("UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes; rerun with UPDATE_GOLDEN=1 and review", path)
		}
	}
}

func derive(t *testing.T, raw []byte) []byte {
	var tj map[string]any
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatal(err)
	}
	model := tj["model"].(map[string]any)
	vocab := model["vocab"].(map[string]any)
	keep := map[string]any{}
	for s, id := range vocab {
		if int(id.(float64)) < 256+NumMerges {
			keep[s] = id
		}
	}
	model["vocab"] = keep
	model["merges"] = model["merges"].([]any)[:NumMerges]
	var added []any
	for _, a := range tj["added_tokens"].([]any) {
		m := a.(map[string]any)
		for i, name := range specials {
			if m["content"] == name {
				m["id"] = 256 + NumMerges + i
				added = append(added, m)
			}
		}
	}
	tj["added_tokens"] = added
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(tj); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
