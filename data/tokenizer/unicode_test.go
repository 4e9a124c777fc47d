package tokenizer

import (
	"slices"
	"testing"
)

// Expected values are what HuggingFace tokenizers 0.23.2 gives (its pre-tokenizer and NFC
// normalizer run from Node); see unicode.go for why Go's tables alone differ.
func TestUnicodeVersions_MatchHF(t *testing.T) {
	splits := []struct {
		in   string
		want []string
	}{
		{"a\U00010D54'", []string{"a\U00010D54", "'"}},                       // Garay letter (Unicode 16)
		{"x\U00010D40\U00010D41", []string{"x", "\U00010D40", "\U00010D41"}}, // Garay digits
		{"'s\U0002EBF0", []string{"'s", "\U0002EBF0"}},                       // CJK Extension I (15.1)
	}
	for _, tt := range splits {
		if got := split(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("split(%+q) = %+q, want %+q", tt.in, got, tt.want)
		}
	}
	norms := []struct{ in, want string }{
		{"e\u0301", "\u00e9"},
		{"\U00011935\U00011930", "\U00011935\U00011930"}, // Go alone composes U+11938
		{"a\u07fd\u0334", "a\u07fd\u0334"},               // Go alone reorders U+0334 first
		{"a\u07fd\u0301", "a\u07fd\u0301"},               // ... and composes á
		{"e\u0301\u07fde\u0301", "\u00e9\u07fd\u00e9"},
		{"\u07fd\u0334\u0301", "\u07fd\u0334\u0301"},
	}
	for _, tt := range norms {
		if got := nfc(tt.in); got != tt.want {
			t.Errorf("nfc(%+q) = %+q, want %+q", tt.in, got, tt.want)
		}
	}
}
