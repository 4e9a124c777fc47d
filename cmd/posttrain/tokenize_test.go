package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/tokenizer"
)

// The tokenizer and its golden ids live with the package (data/tokenizer/testdata, see its README).
var tokenizerTestdata = filepath.Join("..", "..", "data", "tokenizer", "testdata")

// runTokenizeCLI runs `posttrain tokenize` in-process with stdin and returns stdout.
func runTokenizeCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Reader, app.Writer, app.ErrWriter = strings.NewReader(stdin), &out, io.Discard
	args = append([]string{"posttrain", "tokenize", "--tokenizer", filepath.Join(tokenizerTestdata, "tokenizer.json.gz")}, args...)
	err := app.Run(context.Background(), args)
	return out.String(), err
}

type tokenizeGolden struct {
	Text     string `json:"text"`
	IDs      []int  `json:"ids"`
	IDsPlain []int  `json:"ids_plain"`
	Decoded  string `json:"decoded"`
}

// jsonLines marshals each value on its own line, as the command prints them.
func jsonLines(t *testing.T, n int, value func(i int) any) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	for i := range n {
		if err := enc.Encode(value(i)); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// All 415 golden strings through the CLI: ids, ids without added tokens, and back to text.
func TestTokenize_Golden(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(tokenizerTestdata, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Cases []tokenizeGolden }
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	cs := g.Cases
	texts := jsonLines(t, len(cs), func(i int) any { return cs[i].Text })
	for _, tt := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"encode", texts, nil, jsonLines(t, len(cs), func(i int) any { return cs[i].IDs })},
		{"no added tokens", texts, []string{"--no-added-tokens"}, jsonLines(t, len(cs), func(i int) any { return cs[i].IDsPlain })},
		{"decode", jsonLines(t, len(cs), func(i int) any { return cs[i].IDs }), []string{"--decode"},
			jsonLines(t, len(cs), func(i int) any { return cs[i].Decoded })},
	} {
		got, err := runTokenizeCLI(t, tt.stdin, tt.args...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want {
			gl, wl := strings.Split(got, "\n"), strings.Split(tt.want, "\n")
			for i := range min(len(gl), len(wl)) {
				if gl[i] != wl[i] {
					t.Fatalf("%s: line %d\n got %s\nwant %s", tt.name, i+1, gl[i], wl[i])
				}
			}
			t.Fatalf("%s: printed %d lines, want %d", tt.name, len(gl), len(wl))
		}
	}
}

func TestTokenize_InputFileAndSkipSpecial(t *testing.T) {
	in := filepath.Join(t.TempDir(), "ids.jsonl")
	if err := os.WriteFile(in, []byte("[151644, 872, 198, 14990, 151645]\r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := runTokenizeCLI(t, "", "--decode", "--skip-special-tokens", "--input", in)
	if want := "\"user\\nhello\"\n"; err != nil || got != want {
		t.Errorf("decode --skip-special-tokens = %q, %v; want %q", got, err, want)
	}
}

// A bad line stops the command with an error naming the line; earlier lines are printed.
func TestTokenize_BadLines(t *testing.T) {
	tests := []struct {
		name, stdin string
		args        []string
		want        string
		printed     int // lines printed before the bad one
	}{
		{"not a string", "\"ok\"\n[1, 2]\n", nil, "stdin: line 2: want a JSON string", 1},
		{"null", "\"ok\"\n\"ok\"\nnull\n", nil, "stdin: line 3: null", 2},
		{"empty line", "\n", nil, "stdin: line 1: want a JSON string", 0},
		{"not ids", "[1]\n\"text\"\n", []string{"--decode"}, "stdin: line 2: want a JSON array of token ids", 1},
		{"fractional id", "[1.5]\n", []string{"--decode"}, "stdin: line 1: want a JSON array", 0},
		{"unknown id", "[1]\n[2]\n[151669]\n", []string{"--decode"}, "stdin: line 3: token id 151669 is not in the vocabulary", 2},
	}
	tok, err := tokenizer.Load(filepath.Join(tokenizerTestdata, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		var b strings.Builder
		c := tokenizeConfig{Decode: slices.Contains(tt.args, "--decode")}
		err := convertStream(tok, c, "stdin", strings.NewReader(tt.stdin), &b)
		out := b.String()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tt.name, err, tt.want)
		}
		if got := strings.Count(out, "\n"); got != tt.printed {
			t.Errorf("%s: printed %d lines before the error, want %d", tt.name, got, tt.printed)
		}
	}
	// Through the CLI: the error reaches the user with the command's name.
	if _, err := runTokenizeCLI(t, "\"ok\"\n7\n"); err == nil || err.Error() != "posttrain tokenize: stdin: line 2: want a JSON string: json: cannot unmarshal number into Go value of type string" {
		t.Errorf("CLI error = %v", err)
	}
	if _, err := runTokenizeCLI(t, "", "--decode", "--no-added-tokens"); err == nil {
		t.Error("--decode --no-added-tokens: no usage error")
	}
}
