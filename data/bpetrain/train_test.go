package bpetrain

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// hugCorpus is the word-count example of HuggingFace's course (chapter 6, "Byte-Pair Encoding
// tokenization"): hug ×10, pug ×5, pun ×12, bun ×4, hugs ×5, one word per line.
func hugCorpus() []string {
	var texts []string
	for _, wc := range []struct {
		word string
		n    int
	}{{"hug", 10}, {"pug", 5}, {"pun", 12}, {"bun", 4}, {"hugs", 5}} {
		texts = append(texts, strings.Repeat(wc.word+"\n", wc.n))
	}
	return texts
}

// Hand check: u+g (20), u+n (16), h+ug (15), p+un (12), then p+ug and hug+s both 5, the tie to
// the pair of smaller ids (p is a byte, hug is new), then b+un (4). Every word is then one token.
func TestTrain_HugCorpusByHand(t *testing.T) {
	all := [][2]string{{"u", "g"}, {"u", "n"}, {"h", "ug"}, {"p", "un"}, {"p", "ug"}, {"hug", "s"}, {"b", "un"}}
	for _, tc := range []struct {
		name    string
		cfg     Config
		nMerges int
	}{
		{"no limit", Config{VocabSize: 1000}, 7},
		{"min frequency 5 stops before b+un (4)", Config{VocabSize: 1000, MinFrequency: 5}, 6},
		{"min frequency 13 stops before p+un (12)", Config{VocabSize: 1000, MinFrequency: 13}, 3},
		{"vocab size 256+3+3", Config{VocabSize: 262}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Train(tc.cfg, hugCorpus())
			if err != nil {
				t.Fatal(err)
			}
			if want := all[:tc.nMerges]; !slices.Equal(r.Merges, want) {
				t.Errorf("merges: got %v, want %v", r.Merges, want)
			}
			var made []string
			for _, m := range r.Merges {
				made = append(made, m[0]+m[1])
			}
			if !slices.Equal(r.Tokens[256:], made) {
				t.Errorf("new tokens: got %q, want %q", r.Tokens[256:], made)
			}
			if got, want := r.VocabSize(), 256+tc.nMerges+len(Specials); got != want {
				t.Errorf("vocab size: got %d, want %d", got, want)
			}
		})
	}
}

// The 256 byte tokens come in code point order of their ByteLevel runes: Qwen's ids 0-255.
func TestTrain_ByteIDsAreQwens(t *testing.T) {
	r, err := Train(Config{VocabSize: MinVocabSize()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{0: "!", 1: "\"", 93: "~", 94: "¡", 187: "ÿ", 188: "Ā", 220: "Ġ", 255: "Ń"}
	for id, tok := range want {
		if r.Tokens[id] != tok {
			t.Errorf("token %d: got %q, want %q", id, r.Tokens[id], tok)
		}
	}
	if len(r.Tokens) != 256 || len(r.Merges) != 0 {
		t.Errorf("empty corpus: got %d tokens, %d merges; want 256, 0", len(r.Tokens), len(r.Merges))
	}
	for i, a := range r.Added {
		if a.ID != 256+i || a.Content != Specials[i] || !a.Special || a.Normalized {
			t.Errorf("added token %d: %+v", i, a)
		}
	}
}

// Specials never enter a word, so no merge spells part of one.
func TestTrain_SpecialsAreNotLearned(t *testing.T) {
	text := strings.Repeat("<|im_start|>user\nhi<|im_end|>\n<|endoftext|>", 50)
	r, err := Train(Config{VocabSize: 1000}, []string{text})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range r.Tokens[256:] {
		if strings.ContainsAny(tok, "<|>_") {
			t.Errorf("token %q holds markup of a special token", tok)
		}
	}
	// Four pairs of count 50, taken by ids: e+r, h+i, s+er, u+ser.
	if want := [][2]string{{"e", "r"}, {"h", "i"}, {"s", "er"}, {"u", "ser"}}; !slices.Equal(r.Merges, want) {
		t.Errorf("merges: got %v, want %v", r.Merges, want)
	}
}

// The result depends on the multiset of texts only: fed in another order, or as one text cut at
// special tokens, the tokenizer.json is the same bytes.
func TestTrain_Deterministic(t *testing.T) {
	texts, err := DemoCorpus()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{VocabSize: 400, MinFrequency: 2}
	var outs [][]byte
	for _, feed := range [][]string{texts, texts, reversed(texts), {strings.Join(texts, "")}} {
		r, err := Train(cfg, feed)
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.TokenizerJSON()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
	}
	for i := 1; i < len(outs); i++ {
		if !bytes.Equal(outs[0], outs[i]) {
			t.Errorf("run %d gives a different tokenizer.json", i)
		}
	}
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// Where the corpus has pairs enough, the vocabulary has exactly VocabSize tokens.
func TestTrain_VocabSizeRespected(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("testdata", "corpus_mixed.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{MinVocabSize(), 300, 777, 2000} {
		r, err := Train(Config{VocabSize: n}, []string{string(text)})
		if err != nil {
			t.Fatal(err)
		}
		if r.VocabSize() != n {
			t.Errorf("VocabSize %d: got %d tokens", n, r.VocabSize())
		}
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []Config{{VocabSize: 258}, {VocabSize: 300, MinFrequency: -1}, {VocabSize: 300, ModelMaxLength: -5}, {VocabSize: 1 << 25}} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
	if _, err := Train(Config{VocabSize: 300}, []string{"ok", "bad \xff"}); err == nil || !strings.Contains(err.Error(), "text 1") {
		t.Errorf("invalid UTF-8: got %v, want an error naming text 1", err)
	}
}
