//go:build oracle

package tokenizer

// The oracle's inputs and the writer of hf_fuzz.json.gz (TestOracle_UpdateGolden); only the
// oracle tests use them.

import (
	"compress/gzip"
	"encoding/json"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

func writeHFFuzz(t *testing.T, g hfFuzzFile) { writeGzipJSON(t, hfFuzzPath, g) }

// writeGzipJSON writes v as gzipped JSON (HTML characters unescaped) to path: the committed goldens'
// format.
func writeGzipJSON(t *testing.T, path string, v any) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	zw, _ := gzip.NewWriterLevel(f, gzip.BestCompression)
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// fuzzInputs returns random texts built from code-point ranges and fragments chosen to hit every
// branch of the pipeline (scripts, Unicode 15.1/16 additions, combining marks, whitespace kinds,
// contractions, added tokens and near misses, long runs), and random id sequences (low ids are
// single bytes, so sequences cut UTF-8 characters).
func fuzzInputs(seed uint64, nTexts, nIDs int) ([]string, [][]int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	ranges := [][2]rune{{0x20, 0x7E}, {0x20, 0x7E}, {0x20, 0x7E}, {0xA0, 0x24F}, {0x300, 0x36F}, {0x370, 0x3FF},
		{0x400, 0x4FF}, {0x591, 0x5C7}, {0x600, 0x6FF}, {0x7FD, 0x7FD}, {0x898, 0x8D3}, {0x900, 0x97F}, {0xE00, 0xE7F},
		{0x1100, 0x11FF}, {0x1AB0, 0x1ACE}, {0x1C80, 0x1C8F}, {0x1DF0, 0x1DFF}, {0x2000, 0x206F}, {0x2150, 0x218F},
		{0x3000, 0x3000}, {0x3040, 0x30FF}, {0x3099, 0x309A}, {0x4E00, 0x4FFF}, {0xA7C0, 0xA7DF}, {0xAC00, 0xD7A3},
		{0xE000, 0xE00F}, {0xFE00, 0xFE0F}, {0xFF00, 0xFFEF}, {0x105C0, 0x105F3}, {0x10D40, 0x10D8F},
		{0x11380, 0x113D3}, {0x11930, 0x11943}, {0x16100, 0x16139}, {0x16D40, 0x16D79}, {0x1CCF0, 0x1CCF9},
		{0x1D400, 0x1D4FF}, {0x1E030, 0x1E08F}, {0x1E130, 0x1E136}, {0x1E5D0, 0x1E5FA}, {0x1F1E6, 0x1F1FF},
		{0x1F300, 0x1F6FF}, {0x2EBF0, 0x2EE5D}, {0x0, 0x1F}, {0x80, 0x9F}, {0x180E, 0x180E}, {0x10FFF0, 0x10FFFD}}
	frags := []string{"<|im_end|>", "<|im_start|>", "<think>", "</think>", "<tool_response>", "<tool_call>", "<|im_",
		"<|endoftext|>", "'s", "'LL", "'ſ", "'Re", "'d", "\r\n", "\n\n", "  ", "\t", " \n ", "123", "3.14", "\u212a",
		"\u212b", "e\u0301", "\u1100\u1161\u11a8", "\u0915\u093c", "\u200d", "\u00a0", "\u2028", "\U00011935\U00011930",
		"aaaaaaaaaaaaaaaa", "================", "https://example.com/a?b=c&d=e", "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=",
		"0123456789012345", "                ", "\n\n\n\n", "!!!!????", "........", "ﷺ", "ﾊﾟ", "ǅ", "ß", "İ", "ﬀ"}
	texts := make([]string, nTexts)
	for i := range texts {
		var b strings.Builder
		for n := rng.IntN(1 + rng.IntN(60)); n >= 0; n-- {
			if rng.IntN(4) == 0 {
				b.WriteString(frags[rng.IntN(len(frags))])
				continue
			}
			r := ranges[rng.IntN(len(ranges))]
			c := r[0] + rune(rng.IntN(int(r[1]-r[0]+1)))
			if c == 0 { // the Rust binding's C strings end at NUL
				c = 'x'
			}
			b.WriteRune(c)
		}
		texts[i] = b.String()
	}
	idSeqs := make([][]int, nIDs)
	for i := range idSeqs {
		ids := make([]int, 1+rng.IntN(8))
		for k := range ids {
			switch rng.IntN(6) {
			case 0, 1:
				ids[k] = rng.IntN(400)
			case 2:
				ids[k] = 151643 + rng.IntN(26)
			default:
				ids[k] = rng.IntN(151643)
			}
		}
		idSeqs[i] = ids
	}
	return texts, idSeqs
}
