package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/bpetrain"
	"github.com/posttrain/posttrain/data/tokenizer"
)

func TestTokenizerTrain_Demo(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tok")
	out, err := runCLI(t, "tokenizer-train", "--demo", "-o", dir)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := "wrote " + dir + ": 352 tokens (349 model + 3 special), 93 merges"; !strings.HasPrefix(out, want) {
		t.Errorf("stdout %q, want prefix %q", out, want)
	}
	if tok.VocabSize() != 352 || tok.Config().EOSToken != "<|im_end|>" || tok.Config().ChatTemplate != bpetrain.ChatTemplate {
		t.Errorf("loaded: vocab %d, eos %q, template equal %v", tok.VocabSize(), tok.Config().EOSToken, tok.Config().ChatTemplate == bpetrain.ChatTemplate)
	}
}

// --corpus reads the file line by line; --vocab-size bounds the vocabulary.
func TestTokenizerTrain_Corpus(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.txt")
	if err := os.WriteFile(corpus, []byte(strings.Repeat("hello world, 안녕하세요 세계\n", 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "tok")
	if _, err := runCLI(t, "tokenizer-train", "--corpus", corpus, "--vocab-size", "270", "--min-frequency", "1", "-o", out); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 270 {
		t.Errorf("vocab size %d, want 270", tok.VocabSize())
	}
	if s := "hello 세계 👋"; tok.Decode(tok.Encode(s), false) != s {
		t.Errorf("%q does not round-trip", s)
	}
}

func TestTokenizerTrain_Errors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args  []string
		usage bool
	}{
		{[]string{"--demo"}, true}, // no -o
		{[]string{"-o", dir}, true},
		{[]string{"--demo", "--corpus", "x.txt", "-o", dir}, true},
		{[]string{"--demo", "--vocab-size", "100", "-o", dir}, true},
		{[]string{"--demo", "--min-frequency", "-1", "-o", dir}, true},
		{[]string{"--demo", "-o", dir, "extra"}, true},
		{[]string{"--corpus", filepath.Join(dir, "missing.txt"), "-o", dir}, false},
	} {
		_, err := runCLI(t, append([]string{"tokenizer-train"}, tc.args...)...)
		var ue usageError
		if err == nil || errors.As(err, &ue) != tc.usage || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: got %v (usage error: %v), want a one-line error, usage %v", tc.args, err, errors.As(err, &ue), tc.usage)
		}
	}
}

// tokenizer-train replaces a tokenizer already in -o DIR only with --overwrite (and then only its
// four files), and never writes into the directory of its corpus.
func TestTokenizerTrain_ExistingOutput(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "notes.txt"), "mine")
	if _, err := runCLI(t, "tokenizer-train", "--demo", "-o", dir); err != nil {
		t.Fatalf("a directory with other files: %v", err)
	}
	before := snapshot(t, dir)
	_, err := runCLI(t, "tokenizer-train", "--demo", "--vocab-size", "400", "-o", dir)
	if err == nil || !strings.Contains(err.Error(), "already holds vocab.json, merges.txt, tokenizer.json, tokenizer_config.json") {
		t.Fatalf("over a tokenizer: %v, want a refusal naming its files", err)
	}
	if !sameSnapshot(before, snapshot(t, dir)) {
		t.Error("the refused run changed the directory")
	}
	if _, err := runCLI(t, "tokenizer-train", "--demo", "--vocab-size", "400", "-o", dir, "--overwrite"); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("--overwrite touched notes.txt: %q %v", b, err)
	}
	corpus := filepath.Join(dir, "corpus.txt")
	writeFile(t, corpus, "a b c\n")
	if _, err := runCLI(t, "tokenizer-train", "--corpus", corpus, "-o", dir, "--overwrite"); err == nil || !strings.Contains(err.Error(), "contains --corpus") {
		t.Errorf("-o holding the corpus: %v, want a refusal naming --corpus", err)
	}
}
