package tokenizer

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// HuggingFace `tokenizers` (0.23.2) mixes Unicode versions, and Go's own tables are a third one
// (unicode.Version 15.0.0 in Go 1.26, x/text 15.0.0). The differences below were measured by
// running HF's pre-tokenizer and NFC normalizer on every code point of planes 0-3 and 14 (and on
// every combining mark after "a" and next to U+0334 / U+0301), then comparing with Go.

// The regex engine's \p{L} and \p{N} are Unicode 16.0's: letters and digits that Unicode 15.1
// and 16.0 added (CJK Extension I, Garay, Tulu-Tigalari, Kirat Rai, Egyptian hieroglyphs
// extended-A, ...) are unassigned for Go.
var (
	lettersSince15 = &unicode.RangeTable{
		R16: []unicode.Range16{{0x1C89, 0x1C8A, 1}, {0xA7CB, 0xA7CD, 1}, {0xA7DA, 0xA7DC, 1}},
		R32: []unicode.Range32{{0x105C0, 0x105F3, 1}, {0x10D4A, 0x10D65, 1}, {0x10D6F, 0x10D85, 1},
			{0x10EC2, 0x10EC4, 1}, {0x11380, 0x11389, 1}, {0x1138B, 0x1138B, 1}, {0x1138E, 0x1138E, 1},
			{0x11390, 0x113B5, 1}, {0x113B7, 0x113B7, 1}, {0x113D1, 0x113D1, 1}, {0x113D3, 0x113D3, 1},
			{0x11BC0, 0x11BE0, 1}, {0x13460, 0x143FA, 1}, {0x16100, 0x1611D, 1}, {0x16D40, 0x16D6C, 1},
			{0x18CFF, 0x18CFF, 1}, {0x1E5D0, 0x1E5ED, 1}, {0x1E5F0, 0x1E5F0, 1}, {0x2EBF0, 0x2EE5D, 1}},
	}
	numbersSince15 = &unicode.RangeTable{
		R32: []unicode.Range32{{0x10D40, 0x10D49, 1}, {0x116D0, 0x116E3, 1}, {0x11BF0, 0x11BF9, 1},
			{0x16130, 0x16139, 1}, {0x16D70, 0x16D79, 1}, {0x1CCF0, 0x1CCF9, 1}, {0x1E5F1, 0x1E5FA, 1}},
	}
)

func isLetter(r rune) bool {
	return unicode.IsLetter(r) || r >= 0x1C89 && unicode.Is(lettersSince15, r)
}
func isNumber(r rune) bool {
	return unicode.IsNumber(r) || r >= 0x10D40 && unicode.Is(numbersSince15, r)
}

// The NFC normalizer's tables are Unicode 9.0's: to it, the combining marks below (nonzero
// combining class in Go's tables, assigned in Unicode 10-15) and U+11930 (which Unicode 13
// composes after U+11935 into U+11938) are unassigned characters of class 0. Such a character is
// never reordered or composed, and blocks both around it.
var nfcOpaque = &unicode.RangeTable{
	R16: []unicode.Range16{{0x07FD, 0x07FD, 1}, {0x0898, 0x089F, 1}, {0x08CA, 0x08D3, 1}, {0x09FE, 0x09FE, 1},
		{0x0C3C, 0x0C3C, 1}, {0x0D3B, 0x0D3C, 1}, {0x0EBA, 0x0EBA, 1}, {0x1715, 0x1715, 1}, {0x1ABF, 0x1ACE, 1},
		{0x1DF6, 0x1DFA, 1}, {0xA82C, 0xA82C, 1}},
	R32: []unicode.Range32{{0x10D24, 0x10D27, 1}, {0x10EAB, 0x10EAC, 1}, {0x10EFD, 0x10EFF, 1}, {0x10F46, 0x10F50, 1},
		{0x10F82, 0x10F85, 1}, {0x11070, 0x11070, 1}, {0x1133B, 0x1133B, 1}, {0x1145E, 0x1145E, 1},
		{0x11839, 0x1183A, 1}, {0x11930, 0x11930, 1}, {0x1193D, 0x1193E, 1}, {0x11943, 0x11943, 1},
		{0x119E0, 0x119E0, 1}, {0x11A34, 0x11A34, 1}, {0x11A47, 0x11A47, 1}, {0x11A99, 0x11A99, 1},
		{0x11D42, 0x11D42, 1}, {0x11D44, 0x11D45, 1}, {0x11D97, 0x11D97, 1}, {0x11F41, 0x11F42, 1},
		{0x16FF0, 0x16FF1, 1}, {0x1E08F, 0x1E08F, 1}, {0x1E130, 0x1E136, 1}, {0x1E2AE, 0x1E2AE, 1},
		{0x1E2EC, 0x1E2EF, 1}, {0x1E4EC, 0x1E4EF, 1}},
}

// nfc normalizes s to NFC as HuggingFace's NFC normalizer does: Go's NFC applied separately to
// the stretches between nfcOpaque characters, which are kept as they are. (When Go finds s
// already normal, so does HuggingFace: an opaque character can only block a change.)
func nfc(s string) string {
	if norm.NFC.IsNormalString(s) {
		return s
	}
	var out []byte
	start := 0
	for i, r := range s {
		if r >= 0x07FD && unicode.Is(nfcOpaque, r) {
			// Not AppendString: it would normalize across the cut.
			out = append(out, norm.NFC.String(s[start:i])...)
			start = i + utf8.RuneLen(r)
			out = append(out, s[i:start]...)
		}
	}
	if start == 0 {
		return norm.NFC.String(s)
	}
	return string(append(out, norm.NFC.String(s[start:])...))
}
