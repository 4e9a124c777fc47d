package tokenizer

import (
	"encoding/json"
	"slices"
	"testing"
)

// hf_fuzz.json.gz: random texts and id sequences with HuggingFace's answers (oracle_test.go
// writes it). It pins what golden.json does not reach: Unicode 15.1/16 letters and digits, marks
// newer than HF's NFC tables, partial UTF-8 in Decode.

type hfEncoded struct {
	Text       string `json:"text"`
	IDs        []int  `json:"ids"`
	IDsPlain   []int  `json:"ids_plain"`
	IDsSpecial []int  `json:"ids_special"` // add_special_tokens=True
}

type hfDecoded struct {
	IDs         []int  `json:"ids"`
	Decoded     string `json:"decoded"`
	DecodedSkip string `json:"decoded_skip"`
	// DecodedText is transformers' tokenizer.decode(ids, skip_special_tokens=True) where it
	// differs from DecodedSkip (clean_up_tokenization_spaces); only the goldens written by
	// scripts/reference/tokenizer_goldens.py have it.
	DecodedText *string `json:"decoded_text"`
}

// checkDecodeText compares DecodeText(ids, true) with transformers' decode: decoded_text where
// the golden has one, else decoded_skip. It returns how many sequences had a decoded_text.
func checkDecodeText(t *testing.T, tok *BPE, decs []hfDecoded) int {
	t.Helper()
	n, bad := 0, 0
	for _, d := range decs {
		want := d.DecodedSkip
		if d.DecodedText != nil {
			want, n = *d.DecodedText, n+1
		}
		if got := tok.DecodeText(d.IDs, true); got != want {
			if bad++; bad <= 10 {
				t.Errorf("DecodeText(%v, true) = %+q, want transformers' %+q", d.IDs, got, want)
			}
		}
	}
	return n
}

type hfFuzzFile struct {
	Meta   map[string]string `json:"meta"`
	Encode []hfEncoded       `json:"encode"`
	Decode []hfDecoded       `json:"decode"`
}

const hfFuzzPath = "testdata/hf_fuzz.json.gz"

func TestEncode_HFFuzz(t *testing.T) {
	tok, _ := testTokenizer(t)
	data, err := readMaybeGzip(hfFuzzPath)
	if err != nil {
		t.Fatal(err)
	}
	var g hfFuzzFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Encode) < 1000 || len(g.Decode) < 1000 {
		t.Fatalf("%s: %d texts, %d id sequences; want ≥ 1000 each", hfFuzzPath, len(g.Encode), len(g.Decode))
	}
	checkAgainstHF(t, tok, g.Encode, g.Decode)
	checkDecodeText(t, tok, g.Decode)
}

func checkAgainstHF(t *testing.T, tok *BPE, encs []hfEncoded, decs []hfDecoded) {
	t.Helper()
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, e := range encs {
		if got := tok.Encode(e.Text); !slices.Equal(got, e.IDs) {
			report("Encode(%+q)\n got %v\nwant %v", e.Text, got, e.IDs)
		}
		if got := tok.EncodePlain(e.Text); !slices.Equal(got, e.IDsPlain) {
			report("EncodePlain(%+q)\n got %v\nwant %v", e.Text, got, e.IDsPlain)
		}
		if got := tok.EncodeSpecial(e.Text); !slices.Equal(got, e.IDsSpecial) {
			report("EncodeSpecial(%+q)\n got %v\nwant %v", e.Text, got, e.IDsSpecial)
		}
	}
	for _, d := range decs {
		if got := tok.Decode(d.IDs, false); got != d.Decoded {
			report("Decode(%v) = %+q, want %+q", d.IDs, got, d.Decoded)
		}
		if got := tok.Decode(d.IDs, true); got != d.DecodedSkip {
			report("Decode(%v, skipSpecial) = %+q, want %+q", d.IDs, got, d.DecodedSkip)
		}
	}
	if bad > 0 {
		t.Errorf("%d mismatches with HuggingFace over %d texts and %d id sequences", bad, len(encs), len(decs))
	}
}
