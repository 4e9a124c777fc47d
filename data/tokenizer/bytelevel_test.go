package tokenizer

import (
	"slices"
	"testing"
)

func TestByteLevel_Alphabet(t *testing.T) {
	if byteToRune[' '] != 'Ġ' || byteToRune['\n'] != 'Ċ' || byteToRune['a'] != 'a' || byteToRune[0xAD] != 'Ń' {
		t.Errorf("space, newline, a, 0xAD map to %q %q %q %q", byteToRune[' '], byteToRune['\n'], byteToRune['a'], byteToRune[0xAD])
	}
	seen := map[rune]bool{}
	for b := range 256 {
		r := byteToRune[b]
		if seen[r] || runeToByte[r] != int16(b) {
			t.Fatalf("byte 0x%02X ↦ %q is not a bijection", b, r)
		}
		seen[r] = true
	}
}

// Expected values are what Rust's String::from_utf8_lossy gives (its documentation and
// library tests): one U+FFFD per maximal subpart of an ill-formed sequence.
func TestLossyString_MatchesRust(t *testing.T) {
	tests := []struct{ in, want string }{
		{"abc", "abc"},
		{"\xE2\x82", "\uFFFD"},              // truncated 3-byte sequence: one
		{"\xE2\x82A", "\uFFFDA"},            // ... followed by ASCII
		{"\xF0\x9F\x98", "\uFFFD"},          // truncated emoji
		{"\xF0\x9F\x98\x80\xF0", "😀\uFFFD"}, // valid, then a lone lead byte
		{"\xC0\x80", "\uFFFD\uFFFD"},        // overlong: C0 is never a lead byte
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"},
		{"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{"\x80\xBF", "\uFFFD\uFFFD"},
		{"Hello\xF0\x90\x80World", "Hello\uFFFDWorld"},
		{"\xE0\x80\x80", "\uFFFD\uFFFD\uFFFD"}, // E0 needs A0..BF next
		{"\xFF", "\uFFFD"},
	}
	for _, tt := range tests {
		if got := lossyString([]byte(tt.in)); got != tt.want {
			t.Errorf("lossyString(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDecode_PartialUTF8AndSpecial(t *testing.T) {
	tok, _ := testTokenizer(t)
	b := func(c byte) int { return int(tok.model.byteIDs[c]) }
	// "€" is E2 82 AC: cutting the last byte leaves one U+FFFD, as HuggingFace's decoder does.
	if got := tok.Decode([]int{b('a'), b(0xE2), b(0x82), b('b')}, false); got != "a\uFFFDb" {
		t.Errorf("Decode(a E2 82 b) = %q", got)
	}
	if got := tok.Decode([]int{b(0xE2), b(0x82), b(0xAC)}, false); got != "€" {
		t.Errorf("Decode(E2 82 AC) = %q", got)
	}
	ids := tok.Encode("<|im_start|>user\n<think>hi</think><|im_end|>")
	if got, want := tok.Decode(ids, true), "user\n<think>hi</think>"; got != want {
		t.Errorf("Decode(skipSpecial) = %q, want %q (<think> is not special)", got, want)
	}
	if got := tok.Decode([]int{-1, 9707, 1 << 30}, false); got != "Hello" {
		t.Errorf("Decode with unknown ids = %q, want them dropped", got)
	}
}

func TestTokenLookups(t *testing.T) {
	tok, _ := testTokenizer(t)
	for _, tt := range []struct {
		token string
		id    int
	}{{"Hello", 9707}, {"Ġworld", 1879}, {"<|im_end|>", 151645}, {"</think>", 151668}} {
		if id, ok := tok.TokenToID(tt.token); !ok || id != tt.id {
			t.Errorf("TokenToID(%q) = %d, %v; want %d", tt.token, id, ok, tt.id)
		}
		if s, ok := tok.IDToToken(tt.id); !ok || s != tt.token {
			t.Errorf("IDToToken(%d) = %q, %v; want %q", tt.id, s, ok, tt.token)
		}
	}
	if _, ok := tok.IDToToken(151669); ok {
		t.Error("IDToToken(151669) found a token")
	}
	if _, ok := tok.TokenToID("<|nope|>"); ok {
		t.Error("TokenToID(<|nope|>) found a token")
	}
}

// Invalid UTF-8 in the input is replaced first (HuggingFace only accepts valid strings).
func TestEncode_InvalidUTF8(t *testing.T) {
	tok, _ := testTokenizer(t)
	if got, want := tok.Encode("a\xE2\x82b"), tok.Encode("a\uFFFDb"); !slices.Equal(got, want) {
		t.Errorf("Encode(a E2 82 b) = %v, want %v", got, want)
	}
}
