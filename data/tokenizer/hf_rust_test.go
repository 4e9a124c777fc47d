//go:build hftokenizers

package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestHF_ParityWithPureGo runs HuggingFace's Rust library (through github.com/daulet/tokenizers)
// and the pure-Go tokenizer side by side: the golden strings, generated documents, and random id
// sequences for Decode (which cut UTF-8 sequences at random places).
func TestHF_ParityWithPureGo(t *testing.T) {
	goTok, cases := testTokenizer(t)
	data, err := readMaybeGzip("testdata/tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	rust, err := NewHF(data, "testdata/tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer rust.Close()
	texts := []string{}
	for _, c := range cases {
		texts = append(texts, c.Text)
	}
	texts = append(texts, benchText(cases)[60*len(cases):][:100]...)
	for _, s := range texts {
		if strings.ContainsRune(s, 0) { // the binding passes C strings
			continue
		}
		if got, want := goTok.Encode(s), rust.Encode(s); !slices.Equal(got, want) {
			t.Errorf("Encode(%q)\n   go %v\n rust %v", s, got, want)
		}
		if got, want := goTok.EncodePlain(s), rust.EncodePlain(s); !slices.Equal(got, want) {
			t.Errorf("EncodePlain(%q)\n   go %v\n rust %v", s, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		ids := make([]int, 1+rng.IntN(5))
		for i := range ids {
			ids[i] = rng.IntN(goTok.VocabSize())
		}
		for _, skip := range []bool{false, true} {
			got := goTok.Decode(ids, skip)
			if strings.ContainsRune(got, 0) {
				continue
			}
			if want := rust.Decode(ids, skip); got != want {
				t.Fatalf("Decode(%v, %v): go %q, rust %q", ids, skip, got, want)
			}
		}
	}
	if got, want := goTok.VocabSize(), rust.VocabSize(); got != want {
		t.Errorf("VocabSize: go %d, rust %d", got, want)
	}
}
