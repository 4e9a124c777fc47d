package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// qwenPattern is the Split pre-tokenizer regex of Qwen2, Qwen2.5 and Qwen3 (tokenizer.json,
// pre_tokenizer.pretokenizers[0].pattern.Regex). Go's regexp has no lookahead, so splitWords
// implements it by hand; pretokenize_test.go checks it against regexp on random text.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// llama3Pattern is Llama 3's Split regex: Qwen's with numbers in runs of up to three digits.
const llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// gpt2Pattern is the regex of the ByteLevel pre-tokenizer with use_regex (GPT-2's; SmolLM2's).
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// Character classes of the pattern. \s is Unicode White_Space, as in Oniguruma and Rust's regex;
// \p{L} and \p{N} are Unicode 16.0's (see unicode.go).
const (
	clsL    = 1 << iota // \p{L}
	clsN                // \p{N}
	clsWS               // \s
	clsCRLF             // [\r\n]
)

var asciiClass [utf8.RuneSelf]uint8

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiClass[r] = classOfSlow(r)
	}
}

func classOfSlow(r rune) uint8 {
	var c uint8
	switch {
	case isLetter(r):
		c = clsL
	case isNumber(r):
		c = clsN
	case unicode.IsSpace(r): // unicode.IsSpace is exactly the White_Space property
		c = clsWS
		if r == '\r' || r == '\n' {
			c |= clsCRLF
		}
	}
	return c
}

// runeAt decodes the rune at s[i:] with its class; i == len(s) gives width 0 and class 0.
func runeAt(s string, i int) (r rune, w int, cls uint8) {
	if i >= len(s) {
		return 0, 0, 0
	}
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, w = utf8.DecodeRuneInString(s[i:])
	return r, w, classOfSlow(r)
}

// splitWords calls emit for each piece of s that qwenPattern matches, in order. The pattern
// matches somewhere at every position, so the pieces cover s exactly (behavior "Isolated").
func splitWords(s string, emit func(word string)) {
	for i := 0; i < len(s); {
		n := matchAt(s, i, 1)
		emit(s[i : i+n])
		i += n
	}
}

func matchQwen(s string, i int) int   { return matchAt(s, i, 1) }
func matchLlama3(s string, i int) int { return matchAt(s, i, 3) }

// matchAt returns the length of the match at s[i:] (s[i:] non-empty) of qwenPattern (digits 1)
// or llama3Pattern (digits 3: \p{N}{1,3}), trying the alternatives in order as a backtracking
// engine does.
func matchAt(s string, i, digits int) int {
	r, w, cls := runeAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if cls&clsL != 0 {
		return letterRun(s, i+w) - i
	}
	if cls&(clsCRLF|clsN) == 0 {
		if _, _, next := runeAt(s, i+w); next&clsL != 0 {
			return letterRun(s, i+w) - i
		}
	}
	// \p{N} or \p{N}{1,3}
	if cls&clsN != 0 {
		j := i + w
		for k := 1; k < digits; k++ {
			_, w2, c2 := runeAt(s, j)
			if c2&clsN == 0 {
				break
			}
			j += w2
		}
		return j - i
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	start := i
	if r == ' ' {
		if _, nw, next := runeAt(s, i+w); nw > 0 && next&(clsWS|clsL|clsN) == 0 {
			start = i + w
		}
	}
	if _, _, c := runeAt(s, start); c&(clsWS|clsL|clsN) == 0 {
		j := start
		for j < len(s) {
			_, w, c := runeAt(s, j)
			if c&(clsWS|clsL|clsN) != 0 {
				break
			}
			j += w
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j - i
	}
	return whitespaceMatch(s, i)
}

// whitespaceMatch handles the last three alternatives at a whitespace rune s[i:]:
// \s*[\r\n]+ (up to the last line break of the whitespace run), then \s+(?!\S) (the run, less its
// last rune when a non-space follows), then \s+.
func whitespaceMatch(s string, i int) int {
	j, lastBreak, lastStart := i, -1, i
	for j < len(s) {
		_, w, c := runeAt(s, j)
		if c&clsWS == 0 {
			break
		}
		if c&clsCRLF != 0 {
			lastBreak = j
		}
		lastStart = j
		j += w
	}
	switch {
	case lastBreak >= 0:
		return lastBreak + 1 - i
	case j == len(s) || lastStart == i:
		return j - i
	default:
		return lastStart - i
	}
}

// letterRun returns the end of the run of letters starting at s[j:].
func letterRun(s string, j int) int {
	for j < len(s) {
		_, w, c := runeAt(s, j)
		if c&clsL == 0 {
			break
		}
		j += w
	}
	return j
}

// contraction returns the byte length of the case-insensitive contraction suffix (s, t, re, ve,
// m, ll, d) at the start of rest, or 0. Case folding follows Unicode: 'ſ' (U+017F) folds to 's'.
func contraction(rest string) int {
	r, w := utf8.DecodeRuneInString(rest)
	switch r {
	case 's', 'S', 'ſ', 't', 'T', 'm', 'M', 'd', 'D':
		return w
	case 'r', 'R', 'v', 'V':
		if len(rest) > 1 && (rest[1] == 'e' || rest[1] == 'E') {
			return 2
		}
	case 'l', 'L':
		if len(rest) > 1 && (rest[1] == 'l' || rest[1] == 'L') {
			return 2
		}
	}
	return 0
}

// matchGPT2 returns the length of gpt2Pattern's match at s[i:] (s[i:] non-empty).
func matchGPT2(s string, i int) int {
	r, w, cls := runeAt(s, i)
	// 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
	if r == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return 3
			}
		}
	}
	// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': the class of the first rune after the optional
	// space decides the alternative.
	start, c := i, cls
	if r == ' ' {
		if _, nw, next := runeAt(s, i+w); nw > 0 && next&clsWS == 0 {
			start, c = i+w, next
		}
	}
	var want uint8
	switch {
	case c&clsL != 0:
		want = clsL
	case c&clsN != 0:
		want = clsN
	case c&clsWS == 0:
		want = 0 // other: runs while the rune is neither space, letter nor number
	default:
		return gpt2Space(s, i)
	}
	j := start
	for j < len(s) {
		_, w2, c2 := runeAt(s, j)
		if want == 0 && c2&(clsWS|clsL|clsN) != 0 || want != 0 && c2&want == 0 {
			break
		}
		j += w2
	}
	return j - i
}

// gpt2Space handles \s+(?!\S)|\s+ at a whitespace rune s[i:]: the run, less its last rune when
// a non-space follows and the run is longer than one rune.
func gpt2Space(s string, i int) int {
	j, lastStart := i, i
	for j < len(s) {
		_, w, c := runeAt(s, j)
		if c&clsWS == 0 {
			break
		}
		lastStart = j
		j += w
	}
	if j == len(s) || lastStart == i {
		return j - i
	}
	return lastStart - i
}
