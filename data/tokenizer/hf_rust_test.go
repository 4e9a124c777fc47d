//go:build hftokenizers

package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestHF_ParityWithPureGo runs HuggingFace's Rust library (through github.com/daulet/tokenizers)
// and the pure-Go tokenizer side by side on Qwen3: the golden strings, generated documents, and
// random id sequences for Decode (which cut UTF-8 sequences at random places).
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
		if got, want := goTok.EncodeSpecial(s), rust.EncodeSpecial(s); !slices.Equal(got, want) {
			t.Errorf("EncodeSpecial(%q)\n   go %v\n rust %v", s, got, want)
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

// TestHF_FamiliesMatchGoldens runs the Rust library on each family's golden file (the ids that
// Python tokenizers and transformers' AutoTokenizer gave, scripts/reference/tokenizer_goldens.py):
// Encode, EncodePlain, EncodeSpecial (the post-processor's BOS of Llama 3 and Gemma 3), Decode with
// and without special tokens, and the pure-Go tokenizer on the same inputs.
func TestHF_FamiliesMatchGoldens(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			goTok, g := loadFamily(t, f)
			data, err := f.tokenizerJSON()
			if err != nil {
				t.Fatal(err)
			}
			rust, err := NewHF(data, f.name)
			if err != nil {
				t.Fatal(err)
			}
			defer rust.Close()
			bad, n := 0, 0
			report := func(format string, args ...any) {
				if bad++; bad <= 10 {
					t.Errorf(format, args...)
				}
			}
			for _, c := range append(slices.Clip(g.Cases), g.Fuzz...) {
				if strings.ContainsRune(c.Text, 0) {
					continue
				}
				n++
				for _, k := range []struct {
					name       string
					rust, pure []int
					want       []int
				}{
					{"Encode", rust.Encode(c.Text), goTok.Encode(c.Text), c.IDs},
					{"EncodePlain", rust.EncodePlain(c.Text), goTok.EncodePlain(c.Text), c.IDsPlain},
					{"EncodeSpecial", rust.EncodeSpecial(c.Text), goTok.EncodeSpecial(c.Text), c.IDsSpecial},
				} {
					if !slices.Equal(k.rust, k.want) || !slices.Equal(k.pure, k.want) {
						report("%s(%+q)\n rust %v\n   go %v\n want %v", k.name, c.Text, k.rust, k.pure, k.want)
					}
				}
			}
			for _, d := range g.Decode {
				if got := rust.Decode(d.IDs, false); got != d.Decoded && !strings.ContainsRune(d.Decoded, 0) {
					report("Decode(%v) rust %+q, want %+q", d.IDs, got, d.Decoded)
				}
				if got := rust.Decode(d.IDs, true); got != d.DecodedSkip && !strings.ContainsRune(d.DecodedSkip, 0) {
					report("Decode(%v, skip) rust %+q, want %+q", d.IDs, got, d.DecodedSkip)
				}
			}
			if got, want := rust.VocabSize(), goTok.VocabSize(); got != want {
				report("VocabSize: rust %d, go %d", got, want)
			}
			if n < len(g.Cases) || len(g.Decode) < 1000 {
				t.Fatalf("only %d texts and %d id sequences checked", n, len(g.Decode))
			}
			t.Logf("%s: %d texts × 3 encodings, %d id sequences × 2 decodings: %d mismatches", f.name, n, len(g.Decode), bad)
		})
	}
}

// A tokenizer.json saved with truncation and padding (as transformers saves one TRL trained with)
// encodes through Rust as without them, as transformers encodes it (FromJSON).
func TestHF_TruncationAndPaddingAreNotApplied(t *testing.T) {
	data := tinyJSON(t, nil, func(d map[string]any) {
		d["truncation"] = map[string]any{"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0}
		d["padding"] = map[string]any{"strategy": map[string]any{"Fixed": 16}, "direction": "Left", "pad_to_multiple_of": nil,
			"pad_id": 0, "pad_type_id": 0, "pad_token": "a"}
	})
	rust, err := NewHF(data, "trl-saved.json")
	if err != nil {
		t.Fatal(err)
	}
	defer rust.Close()
	plain, err := FromJSON(tinyJSON(t, nil, nil), "plain.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"hello world", "hello world hello world"} {
		if got, want := rust.Encode(text), plain.Encode(text); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", text, got, want)
		}
		if got, want := rust.EncodeSpecial(text), plain.EncodeSpecial(text); !slices.Equal(got, want) {
			t.Errorf("EncodeSpecial(%q) = %v, want %v", text, got, want)
		}
	}
}
