package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedToken is one entry of tokenizer.json's "added_tokens" (and of tokenizer_config.json's
// "added_tokens_decoder"): a token matched whole in the input text before pre-tokenization.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"` // match only where no word character touches it
	LStrip     bool   `json:"lstrip"`      // the match swallows the whitespace on its left
	RStrip     bool   `json:"rstrip"`      // ... and on its right
	Normalized bool   `json:"normalized"`  // matched in the normalized (NFC) text, not the raw text
	Special    bool   `json:"special"`     // dropped by Decode(ids, true)
}

// addedMatcher finds added tokens in text as HuggingFace's AddedVocabulary::find_matches does with
// an Aho-Corasick automaton in LeftmostLongest mode: the leftmost match, the longest one there,
// then the search resumes after it.
type addedMatcher struct {
	tokens  []AddedToken
	byFirst [256][]int // first byte of content → indices into tokens, longest content first
	first   []byte     // the distinct first bytes
	// byTwo holds the tokens of two bytes or more by their first two bytes, longest first;
	// single the one-byte tokens (index+1, 0: none). Gemma 3 has thousands of "<..." tokens.
	byTwo  map[uint16][]int
	single [256]int
}

func newAddedMatcher(tokens []AddedToken) *addedMatcher {
	m := &addedMatcher{tokens: tokens, byTwo: make(map[uint16][]int)}
	for i, t := range tokens {
		c := t.Content[0]
		if len(m.byFirst[c]) == 0 {
			m.first = append(m.first, c)
		}
		m.byFirst[c] = append(m.byFirst[c], i)
		if len(t.Content) == 1 {
			m.single[c] = i + 1
		} else {
			k := uint16(c)<<8 | uint16(t.Content[1])
			m.byTwo[k] = append(m.byTwo[k], i)
		}
	}
	for _, idx := range m.byFirst {
		sort.SliceStable(idx, func(a, b int) bool {
			return len(tokens[idx[a]].Content) > len(tokens[idx[b]].Content)
		})
	}
	for _, idx := range m.byTwo {
		sort.SliceStable(idx, func(a, b int) bool {
			return len(tokens[idx[a]].Content) > len(tokens[idx[b]].Content)
		})
	}
	return m
}

// segment is a piece of the input: an added token (id ≥ 0) or text to normalize and encode.
type segment struct {
	id   int
	text string
}

// split cuts s into text segments and added-token segments, in order; appended to dst.
func (m *addedMatcher) split(s string, dst []segment) []segment {
	if m == nil || len(m.tokens) == 0 {
		return append(dst, segment{-1, s})
	}
	done := 0 // end of the last emitted segment
	for pos := 0; pos < len(s); {
		tok, at := m.next(s, pos)
		if tok == nil {
			break
		}
		start, stop := at, at+len(tok.Content)
		pos = stop
		if tok.SingleWord && !singleWord(s, start, stop) {
			continue
		}
		if tok.LStrip {
			start = max(len(strings.TrimRightFunc(s[:start], unicode.IsSpace)), done)
		}
		if tok.RStrip {
			stop = len(s) - len(strings.TrimLeftFunc(s[stop:], unicode.IsSpace))
		}
		if done < start {
			dst = append(dst, segment{-1, s[done:start]})
		}
		dst = append(dst, segment{tok.ID, s[start:stop]})
		done = stop
	}
	if done < len(s) {
		dst = append(dst, segment{-1, s[done:]})
	}
	return dst
}

// next returns the leftmost-longest token occurrence in s at or after pos, and where it starts.
func (m *addedMatcher) next(s string, pos int) (*AddedToken, int) {
	for pos < len(s) {
		if len(m.first) == 1 {
			i := strings.IndexByte(s[pos:], m.first[0])
			if i < 0 {
				return nil, -1
			}
			pos += i
		} else if len(m.byFirst[s[pos]]) == 0 {
			pos++
			continue
		}
		if pos+1 < len(s) {
			for _, k := range m.byTwo[uint16(s[pos])<<8|uint16(s[pos+1])] {
				if strings.HasPrefix(s[pos:], m.tokens[k].Content) {
					return &m.tokens[k], pos
				}
			}
		}
		if k := m.single[s[pos]]; k > 0 {
			return &m.tokens[k-1], pos
		}
		pos++
	}
	return nil, -1
}

// singleWord reports whether s[start:stop] has no word character (regex \w) on either side.
func singleWord(s string, start, stop int) bool {
	before, _ := utf8.DecodeLastRuneInString(s[:start])
	after, _ := utf8.DecodeRuneInString(s[stop:])
	return (start == 0 || !isWordRune(before)) && (stop == len(s) || !isWordRune(after))
}

// isWordRune is Rust regex's Unicode \w: alphabetic, marks, decimal digits, connector
// punctuation and the joiners.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.IsMark(r) ||
		unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D ||
		unicode.Is(unicode.Other_Alphabetic, r)
}
