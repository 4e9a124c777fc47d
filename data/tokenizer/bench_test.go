package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// benchText returns about 1.2 MB of mixed text, split into documents: the golden strings repeated
// (English, code, CJK, Korean, emoji, chat markup) and generated prose whose words are drawn from
// a large pool of random Latin, Hangul and CJK words with numbers and punctuation.
func benchText(cases []goldenCase) []string {
	var docs []string
	for len(docs) < 60*len(cases) {
		for _, c := range cases {
			docs = append(docs, c.Text)
		}
	}
	rng := rand.New(rand.NewPCG(7, 11))
	word := func() string {
		var b strings.Builder
		n := 1 + rng.IntN(9)
		switch rng.IntN(6) {
		case 0:
			for range n {
				b.WriteRune(rune(0xAC00 + rng.IntN(11172))) // Hangul syllables
			}
		case 1:
			for range n {
				b.WriteRune(rune(0x4E00 + rng.IntN(2000))) // common CJK
			}
		default:
			for range n {
				b.WriteByte(byte('a' + rng.IntN(26)))
			}
		}
		return b.String()
	}
	pool := make([]string, 30000)
	for i := range pool {
		pool[i] = word()
	}
	punct := []string{" ", " ", " ", " ", ", ", ". ", "\n", "\n\n", " (", ") ", ": ", " - ", "'s "}
	for range 500 {
		var b strings.Builder
		for b.Len() < 1200 {
			b.WriteString(pool[rng.IntN(len(pool))])
			if rng.IntN(20) == 0 {
				b.WriteString(" " + string(rune('0'+rng.IntN(10))) + string(rune('0'+rng.IntN(10))))
			}
			b.WriteString(punct[rng.IntN(len(punct))])
		}
		docs = append(docs, b.String())
	}
	return docs
}

func benchmarkEncode(b *testing.B, cold bool) {
	tok, cases := testTokenizer(b)
	docs := benchText(cases)
	size := 0
	for _, d := range docs {
		size += len(d)
	}
	if size < 1<<20 {
		b.Fatalf("bench text is %d bytes, want ≥ 1 MiB", size)
	}
	b.SetBytes(int64(size))
	b.ResetTimer()
	tokens := 0
	for b.Loop() {
		if cold {
			b.StopTimer()
			tok.model.cache = newWordCache()
			b.StartTimer()
		}
		for _, d := range docs {
			tokens += len(tok.Encode(d))
		}
	}
	b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
}

// BenchmarkEncode: steady state, the word cache warm (as when tokenizing a dataset).
func BenchmarkEncode(b *testing.B) { benchmarkEncode(b, false) }

// BenchmarkEncodeCold: every pass starts with an empty word cache, so every distinct word is
// merged once per pass.
func BenchmarkEncodeCold(b *testing.B) { benchmarkEncode(b, true) }

// BenchmarkEncodeFamilies: the same text through Llama 3's and Gemma 3's tokenizers (Gemma's
// pieces between added tokens are single BPE words of up to a document's length).
func BenchmarkEncodeFamilies(b *testing.B) {
	_, cases := testTokenizer(b)
	docs := benchText(cases)
	size := 0
	for _, d := range docs {
		size += len(d)
	}
	for _, f := range families[:2] {
		b.Run(f.name, func(b *testing.B) {
			tok, _ := loadFamily(b, f)
			b.SetBytes(int64(size))
			tokens := 0
			for b.Loop() {
				for _, d := range docs {
					tokens += len(tok.Encode(d))
				}
			}
			b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}
