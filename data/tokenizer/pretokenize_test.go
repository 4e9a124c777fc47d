package tokenizer

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// ws is \s as Oniguruma and Rust's regex define it (Unicode White_Space); Go's regexp \s is
// ASCII-only.
const ws = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

// refHead is qwenPattern's first five alternatives for Go's regexp (leftmost-first, as a
// backtracking engine picks). The last two, \s+(?!\S)|\s+, need lookahead and are done by hand.
var refHead = regexp.MustCompile(`^(?:(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^` + ws + `\p{L}\p{N}]+[\r\n]*|[` + ws + `]*[\r\n]+)`)

var refSpaces = regexp.MustCompile(`^[` + ws + `]+`)

// refSplit splits s with qwenPattern using regexp plus a hand-coded lookahead: an independent
// check of splitWords.
func refSplit(s string) []string {
	var out []string
	for len(s) > 0 {
		n := len(refHead.FindString(s))
		if n == 0 {
			run := refSpaces.FindString(s)
			n = len(run)
			if n < len(s) { // \s+(?!\S): give back the last space before a non-space
				if k := len(run) - len(lastRune(run)); k > 0 {
					n = k
				}
			}
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

func lastRune(s string) string {
	r := []rune(s)
	return string(r[len(r)-1])
}

func split(s string) []string {
	var out []string
	splitWords(s, func(w string) { out = append(out, w) })
	return out
}

func TestSplitWords_Examples(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"Hello, world!", []string{"Hello", ",", " world", "!"}},
		{"it's I'M they'RE it'ſ", []string{"it", "'s", " I", "'M", " they", "'RE", " it", "'ſ"}},
		{"a  b   c", []string{"a", " ", " b", "  ", " c"}},
		{"x \n\n  y  ", []string{"x", " \n\n", " ", " y", "  "}},
		{"12345", []string{"1", "2", "3", "4", "5"}},
		{" !!!\r\n\tx", []string{" !!!\r\n", "\tx"}},
		{"中文한국어", []string{"中文한국어"}},
	}
	for _, tt := range tests {
		if got := split(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("split(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := refSplit(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("refSplit(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestSplitWords_MatchesRegexp compares splitWords with refSplit on random strings over an
// alphabet that exercises every alternative and class boundary.
func TestSplitWords_MatchesRegexp(t *testing.T) {
	alphabet := []string{"a", "Z", "é", "ſ", "中", "ㄱ", "1", "٣", "Ⅻ", "½", " ", "  ", "\t", "\n", "\r",
		"\u00a0", "\u3000", "\u2028", "\u0085", "\v", "'", "s", "t", "re", "VE", "ll", "D", "m", ".",
		"!", "_", "-", "\u0301", "😀", "\u200d", "$", "'S", "'Ll"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := rng.IntN(12); n >= 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		s := b.String()
		got, want := split(s), refSplit(s)
		if !slices.Equal(got, want) {
			t.Fatalf("split(%q)\n got %q\nwant %q", s, got, want)
		}
	}
}
