package tokenizer

import "unicode/utf8"

// byteToRune is GPT-2's ByteLevel alphabet: every byte maps to a printable rune, so that a BPE
// vocabulary can be stored as text. Printable Latin-1 bytes map to themselves; the other 68 bytes
// (controls, space, 0x7F-0xA0, 0xAD) map, in byte order, to U+0100, U+0101, ... (space → 'Ġ').
var byteToRune [256]rune

// runeToByte inverts byteToRune; -1 marks a rune outside the alphabet. Every rune of the
// alphabet is below 0x144.
var runeToByte [0x144]int16

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = 256 + n
			n++
		}
		runeToByte[byteToRune[b]] = int16(b)
	}
}

// byteLevelString returns the ByteLevel spelling of raw bytes (how the vocabulary stores them).
func byteLevelString(raw string) string {
	out := make([]rune, len(raw))
	for i := 0; i < len(raw); i++ {
		out[i] = byteToRune[raw[i]]
	}
	return string(out)
}

// appendTokenBytes appends the bytes a token stands for, as the ByteLevel decoder does: when every
// rune of the token is in the alphabet, its bytes; otherwise (an added token such as "<think>" is
// plain ASCII and maps to itself anyway) the token's own UTF-8 bytes.
func appendTokenBytes(dst []byte, token string) []byte {
	start := len(dst)
	for _, r := range token {
		if r >= 0x144 || runeToByte[r] < 0 {
			return append(dst[:start], token...)
		}
		dst = append(dst, byte(runeToByte[r]))
	}
	return dst
}

// lossyString converts bytes to a string the way Rust's String::from_utf8_lossy does: each maximal
// prefix of an ill-formed sequence ("maximal subpart", Unicode §3.9) becomes one U+FFFD. Go's
// strings.ToValidUTF8 (one U+FFFD per run) and utf8.DecodeRune (one per byte) both differ.
func lossyString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			out = append(out, b[i])
			i++
			continue
		}
		n := validPrefix(b[i:])
		if n > 0 {
			out = append(out, b[i:i+n]...)
			i += n
			continue
		}
		out = append(out, "\uFFFD"...)
		i += invalidLen(b[i:])
	}
	return string(out)
}

// validPrefix returns the length of the well-formed multi-byte sequence at the start of b, or 0.
func validPrefix(b []byte) int {
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError && n <= 1 {
		return 0
	}
	return n
}

// invalidLen returns how many bytes of the ill-formed sequence at the start of b one U+FFFD
// replaces: the lead byte plus the continuation bytes that could still have completed it.
func invalidLen(b []byte) int {
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	var size int
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		size = 2
	case c == 0xE0:
		size, lo = 3, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		size = 3
	case c == 0xED:
		size, hi = 3, 0x9F
	case c == 0xF0:
		size, lo = 4, 0x90
	case c >= 0xF1 && c <= 0xF3:
		size = 4
	case c == 0xF4:
		size, hi = 4, 0x8F
	default:
		return 1 // not a lead byte
	}
	n := 1
	for n < size && n < len(b) {
		c := b[n]
		if n == 1 && (c < lo || c > hi) || n > 1 && (c < 0x80 || c > 0xBF) {
			break
		}
		n++
	}
	return n
}
