package sft_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
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
	cfg := sft.DefaultConfig()
	cfg.DatasetTextField = "content"
	d, err := data.ReadFileWith(writeRows(t, "c.jsonl", `{"content": "2×3=6", "text": "not this"}`+"\n"), data.ReadOptions{TextField: "content"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sft.New(m, d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := len(m.Text.Tokenizer.Encode("2×3=6"))
	if got := tr.Tokens(0); got != n {
		t.Errorf("content row: %d tokens, want %d (the text, no EOS)", got, n)
	}
	if got := tr.Units(0); got != float64(n-1) {
		t.Errorf("content row: %v scored tokens, want %d", got, n-1)
	}
	std, err := sft.New(m, looptest.Read(t, writeRows(t, "t.jsonl", `{"text": "2×3=6"}`+"\n")), sft.DefaultConfig())
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

// firstIDs returns the token ids of example i (unpadded to Tokens(i)).
func firstIDs(t *testing.T, tr *sft.Trainer, i int) []int32 {
	t.Helper()
	in, err := tr.Batch([]int{i})
	if err != nil {
		t.Fatal(err)
	}
	return in.Get("IDs").([][]int32)[0][:tr.Tokens(i)]
}

// eos_token replaces the tokenizer's <|im_end|> where TRL appends EOS (text rows, standard
// completions), is saved as the output's tokenizer_config.json eos_token (config.json's and
// generation_config.json's ids unchanged, as TRL), and a token outside the vocabulary is an error
// naming the option.
func TestSFT_EOSToken(t *testing.T) {
	dir := looptest.Model(t)
	m := looptest.Load(t, dir, false)
	cfg := sft.DefaultConfig()
	cfg.EOSToken = "<|endoftext|>"
	looptest.Common(t, &cfg.Training, 1e-3, 2, 1, 1)
	rows := `{"prompt": "2×3=", "completion": "6"}` + "\n" + `{"prompt": "2×4=", "completion": "8<|endoftext|>"}` + "\n"
	tr, err := sft.New(m, looptest.Read(t, writeRows(t, "pc.jsonl", rows)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		ids := firstIDs(t, tr, i)
		if last := ids[len(ids)-1]; last != tinymodel.EndOfText || ids[len(ids)-2] == tinymodel.EndOfText {
			t.Errorf("row %d ends %v, want one <|endoftext|> (%d)", i+1, ids[len(ids)-2:], tinymodel.EndOfText)
		}
	}
	text, err := sft.New(m, looptest.Read(t, writeRows(t, "t.jsonl", `{"text": "2×3=6"}`+"\n")), cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := append(m.Text.Tokenizer.Encode("2×3=6"), tinymodel.EndOfText)
	if got := firstIDs(t, text, 0); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("text row ids %v, want %v", got, want)
	}
	if _, err := loop.Run(context.Background(), m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t)}); err != nil {
		t.Fatal(err)
	}
	tc := readJSON(t, filepath.Join(cfg.OutputDir, "tokenizer_config.json"))
	src := readJSON(t, filepath.Join(dir, "tokenizer_config.json"))
	if tc["eos_token"] != "<|endoftext|>" || tc["chat_template"] != src["chat_template"] || tc["pad_token"] != src["pad_token"] {
		t.Errorf("saved tokenizer_config.json: eos_token %v, chat_template kept %v, pad_token %v", tc["eos_token"], tc["chat_template"] == src["chat_template"], tc["pad_token"])
	}
	for _, name := range []string{"config.json", "generation_config.json"} {
		if got, want := readJSON(t, filepath.Join(cfg.OutputDir, name))["eos_token_id"], readJSON(t, filepath.Join(dir, name))["eos_token_id"]; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s eos_token_id %v, want the base's %v", name, got, want)
		}
	}
	if eos, _, err := looptest.Load(t, cfg.OutputDir, false).Text.EOS(); err != nil || eos != "<|endoftext|>" {
		t.Errorf("reloaded output's EOS %q (err %v), want <|endoftext|>", eos, err)
	}
	cfg.EOSToken = "<|eot_id|>"
	if _, err := sft.New(m, looptest.Read(t, writeRows(t, "t.jsonl", `{"text": "a"}`+"\n")), cfg); err == nil ||
		!strings.Contains(err.Error(), `eos_token "<|eot_id|>" is not in the vocabulary`) {
		t.Errorf("eos_token outside the vocabulary: error %v", err)
	}
}

func readJSON(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}
