package sft_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/config"
	"github.com/posttrain/posttrain/trainers/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// writeRows writes rows (JSONL) into a temporary file and returns its path.
func writeRows(t *testing.T, name, rows string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// dataset_text_field: the rows' text comes from the named column, every token scored. As TRL
// v0.24's add_eos, which tests the literal "text" column, no EOS is appended to it; the same row
// under "text" gets the tokenizer's <|im_end|>.
func TestSFT_DatasetTextField(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	cfg := config.DefaultSFT()
	cfg.DatasetTextField = "content"
	d, err := data.ReadFileWith(writeRows(t, "c.jsonl", `{"content": "2×3=6", "text": "not this"}`+"\n"), data.ReadOptions{TextField: "content"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sft.New(m, d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := len(m.Tokenizer.Encode("2×3=6"))
	if got := tr.Tokens(0); got != n {
		t.Errorf("content row: %d tokens, want %d (the text, no EOS)", got, n)
	}
	if got := tr.Units(0); got != float64(n-1) {
		t.Errorf("content row: %v scored tokens, want %d", got, n-1)
	}
	std, err := sft.New(m, looptest.Read(t, writeRows(t, "t.jsonl", `{"text": "2×3=6"}`+"\n")), config.DefaultSFT())
	if err != nil {
		t.Fatal(err)
	}
	if got := std.Tokens(0); got != n+1 {
		t.Errorf("text row: %d tokens, want %d (the text and <|im_end|>)", got, n+1)
	}
	// Rows read from another column than dataset_text_field names are refused, naming the option.
	cfg.DatasetTextField = "body"
	if _, err := sft.New(m, d, cfg); err == nil || !strings.Contains(err.Error(), `dataset_text_field is "body" but the rows were read from "content"`) {
		t.Errorf("mismatched dataset_text_field: error %v", err)
	}
}
