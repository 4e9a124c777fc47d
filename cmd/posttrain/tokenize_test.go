package main

import (
	"bytes"
	"compress/gzip"
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

// runTokenizeCLI runs `posttrain tokenize` in-process with stdin and returns stdout; the
// tokenizer is Qwen3's unless args name one.
func runTokenizeCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	app := newApp()
	app.Reader, app.Writer, app.ErrWriter = strings.NewReader(stdin), &out, io.Discard
	if !slices.Contains(args, "--tokenizer") {
		args = append([]string{"--tokenizer", filepath.Join(tokenizerTestdata, "tokenizer.json.gz")}, args...)
	}
	args = append([]string{"posttrain", "tokenize"}, args...)
	err := app.Run(context.Background(), args)
	return out.String(), err
}

type tokenizeGolden struct {
	Text       string `json:"text"`
	IDs        []int  `json:"ids"`
	IDsPlain   []int  `json:"ids_plain"`
	IDsSpecial []int  `json:"ids_special"` // transformers' default encode (add_special_tokens=True)
	Decoded    string `json:"decoded"`
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

// readTokenizeGolden reads the cases of a golden file of data/tokenizer/testdata (gzipped or not).
func readTokenizeGolden(t *testing.T, file string) []tokenizeGolden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(tokenizerTestdata, file))
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(file, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	var g struct{ Cases []tokenizeGolden }
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) == 0 {
		t.Fatalf("%s: no cases", file)
	}
	return g.Cases
}

// All 415 golden strings through the CLI: ids, ids without added tokens, transformers' default
// encode (--add-special-tokens: nothing added for Qwen), and back to text.
func TestTokenize_Golden(t *testing.T) {
	cs := readTokenizeGolden(t, "golden.json")
	texts := jsonLines(t, len(cs), func(i int) any { return cs[i].Text })
	checkTokenizeCLI(t, "tokenizer.json.gz", []tokenizeRun{
		{"encode", texts, nil, jsonLines(t, len(cs), func(i int) any { return cs[i].IDs })},
		{"no added tokens", texts, []string{"--no-added-tokens"}, jsonLines(t, len(cs), func(i int) any { return cs[i].IDsPlain })},
		{"add special tokens", texts, []string{"--add-special-tokens"}, jsonLines(t, len(cs), func(i int) any { return cs[i].IDsSpecial })},
		{"decode", jsonLines(t, len(cs), func(i int) any { return cs[i].IDs }), []string{"--decode"},
			jsonLines(t, len(cs), func(i int) any { return cs[i].Decoded })},
	})
}

// --add-special-tokens on Llama 3.1 and Gemma 3 is transformers' default encode: the BOS their
// post-processor adds (AutoTokenizer's ids_special in the goldens), and without the flag none.
func TestTokenize_FamiliesAddSpecialTokens(t *testing.T) {
	for _, tc := range []struct {
		family string
		bos    int
	}{{"llama3", 128000}, {"gemma3", 2}} {
		cs := readTokenizeGolden(t, tc.family+"/golden.json.gz")
		for _, c := range cs {
			if len(c.IDsSpecial) != len(c.IDs)+1 || c.IDsSpecial[0] != tc.bos {
				t.Fatalf("%s golden: %q: ids_special %v is not [%d] + ids", tc.family, c.Text, c.IDsSpecial, tc.bos)
			}
		}
		texts := jsonLines(t, len(cs), func(i int) any { return cs[i].Text })
		checkTokenizeCLI(t, tc.family, []tokenizeRun{
			{tc.family + " add special tokens", texts, []string{"--add-special-tokens"}, jsonLines(t, len(cs), func(i int) any { return cs[i].IDsSpecial })},
			{tc.family + " encode", texts, nil, jsonLines(t, len(cs), func(i int) any { return cs[i].IDs })},
		})
	}
}

type tokenizeRun struct {
	name, stdin string
	args        []string
	want        string
}

// checkTokenizeCLI runs `posttrain tokenize --tokenizer tokenizerTestdata/tokenizer` on each run's
// stdin and compares the printed lines.
func checkTokenizeCLI(t *testing.T, tokenizer string, runs []tokenizeRun) {
	t.Helper()
	for _, tt := range runs {
		args := append([]string{"--tokenizer", filepath.Join(tokenizerTestdata, tokenizer)}, tt.args...)
		got, err := runTokenizeCLI(t, tt.stdin, args...)
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
	for _, args := range [][]string{{"--decode", "--no-added-tokens"}, {"--decode", "--add-special-tokens"}, {"--add-special-tokens", "--no-added-tokens"}} {
		if _, err := runTokenizeCLI(t, "", args...); err == nil || !strings.Contains(err.Error(), args[1]) {
			t.Errorf("%v: err %v, want a usage error naming %s", args, err, args[1])
		}
	}
}

// tokenize --tokenizer FILE.gguf encodes as the converted checkpoint's tokenizer does; a .gguf
// path that is not a GGUF is refused naming it.
func TestTokenize_GGUF(t *testing.T) {
	dir := t.TempDir()
	converted := filepath.Join(dir, "converted")
	if _, err := runCLI(t, "convert", tinyGGUF, "--out", converted); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, []byte(`"Hello world"`+"\n"+`"<|im_start|>user"`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want, err := runCLI(t, "tokenize", "--tokenizer", converted, "--input", input)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runCLI(t, "tokenize", "--tokenizer", tinyGGUF, "--input", input)
	if err != nil || got != want || strings.Count(got, "\n") != 2 {
		t.Errorf("--tokenizer FILE.gguf: %q, %v; the converted tokenizer: %q", got, err, want)
	}
	text := filepath.Join(dir, "notes.gguf")
	if err := os.WriteFile(text, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "tokenize", "--tokenizer", text, "--input", input); err == nil || !strings.Contains(err.Error(), "notes.gguf is not a GGUF file") {
		t.Errorf("a text file named .gguf: %v", err)
	}
}
