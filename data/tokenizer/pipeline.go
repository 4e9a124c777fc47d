package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The normalizer, pre-tokenizer, post-processor and decoder of a tokenizer.json, built from the
// file's own description. Each supports what Qwen2/2.5/3, Llama 3.x, SmolLM2 and Gemma 3 use;
// anything else is an error naming the component and the field, never an approximation.

// component is the shape shared by normalizers, pre-tokenizers, post-processors and decoders.
type component struct {
	Type           string          `json:"type"`
	Pretokenizers  []component     `json:"pretokenizers"`
	Normalizers    []component     `json:"normalizers"`
	Processors     []component     `json:"processors"`
	Decoders       []component     `json:"decoders"`
	Pattern        json.RawMessage `json:"pattern"`
	Content        *string         `json:"content"`
	Prepend        *string         `json:"prepend"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       *bool           `json:"use_regex"`
	Individual     bool            `json:"individual_digits"`
	Start          int             `json:"start"` // Strip decoder
	Stop           int             `json:"stop"`
	Single         []templatePiece `json:"single"`
	SpecialTokens  map[string]struct {
		IDs []int `json:"ids"`
	} `json:"special_tokens"`
}

// templatePiece is one item of TemplateProcessing's "single".
type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// child names a nested field in an error: "pre_tokenizer: pretokenizers[0].pattern".
func child(where, field string) string {
	if !strings.Contains(where, ":") {
		return where + ": " + field
	}
	return where + "." + field
}

func parseComponent(raw json.RawMessage) (*component, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// pattern is a Split / Replace "pattern": {"String": s} or {"Regex": r}.
type pattern struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func parsePattern(raw json.RawMessage) (pattern, error) {
	var p pattern
	if err := json.Unmarshal(raw, &p); err != nil || (p.String == nil) == (p.Regex == nil) {
		return p, fmt.Errorf("pattern: want {\"String\": ...} or {\"Regex\": ...}, got %s", compact(raw))
	}
	return p, nil
}

// ---- normalizer ----

// normalizer maps a piece of input text to its normalized form.
type normalizer func(string) string

func buildNormalizer(c *component, where string) ([]normalizer, error) {
	if c == nil {
		return nil, nil
	}
	switch c.Type {
	case "NFC":
		return []normalizer{nfc}, nil
	case "Sequence":
		var out []normalizer
		for i := range c.Normalizers {
			n, err := buildNormalizer(&c.Normalizers[i], child(where, fmt.Sprintf("normalizers[%d]", i)))
			if err != nil {
				return nil, err
			}
			out = append(out, n...)
		}
		return out, nil
	case "Replace":
		p, err := parsePattern(c.Pattern)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if p.String == nil {
			return nil, fmt.Errorf("%s: Replace with a Regex pattern is not supported (only String)", where)
		}
		if c.Content == nil || *p.String == "" {
			return nil, fmt.Errorf("%s: Replace needs a non-empty pattern and a content", where)
		}
		from, to := *p.String, *c.Content
		return []normalizer{func(s string) string { return strings.ReplaceAll(s, from, to) }}, nil
	case "Prepend":
		if c.Prepend == nil {
			return nil, fmt.Errorf("%s: Prepend needs \"prepend\"", where)
		}
		pre := *c.Prepend
		return []normalizer{func(s string) string {
			if s == "" {
				return s
			}
			return pre + s
		}}, nil
	}
	return nil, fmt.Errorf("%s: type %q is not supported (only NFC, Replace, Prepend, Sequence or null)", where, c.Type)
}

// ---- pre-tokenizer ----

// preStep is one pre-tokenizer: it cuts a piece of normalized text into smaller pieces, in order,
// dropping empty ones.
type preStep func(s string, emit func(string))

// preTokenizer is the pre-tokenizer of a file: its steps applied in turn to every piece, and
// whether a ByteLevel step maps the words to the byte alphabet.
type preTokenizer struct {
	steps     []preStep
	byteLevel bool
}

func (p *preTokenizer) run(s string, emit func(string)) {
	switch len(p.steps) {
	case 0:
		if s != "" {
			emit(s)
		}
	case 1:
		p.steps[0](s, emit)
	default:
		p.apply(0, s, emit)
	}
}

func (p *preTokenizer) apply(k int, s string, emit func(string)) {
	if k == len(p.steps) {
		emit(s)
		return
	}
	p.steps[k](s, func(w string) { p.apply(k+1, w, emit) })
}

func buildPreTokenizer(c *component, where string, p *preTokenizer) error {
	if c == nil {
		return nil
	}
	switch c.Type {
	case "Sequence":
		for i := range c.Pretokenizers {
			if err := buildPreTokenizer(&c.Pretokenizers[i], child(where, fmt.Sprintf("pretokenizers[%d]", i)), p); err != nil {
				return err
			}
		}
		return nil
	case "ByteLevel":
		p.byteLevel = true
		if c.AddPrefixSpace {
			p.steps = append(p.steps, func(s string, emit func(string)) {
				if !strings.HasPrefix(s, " ") {
					s = " " + s
				}
				emit(s)
			})
		}
		if c.UseRegex == nil || *c.UseRegex { // HF's default is true
			p.steps = append(p.steps, regexStep(matchGPT2))
		}
		return nil
	case "Digits":
		p.steps = append(p.steps, digitsStep(c.Individual))
		return nil
	case "Split":
		pat, err := parsePattern(c.Pattern)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if c.Invert {
			return fmt.Errorf("%s: Split with invert true is not supported", where)
		}
		if pat.Regex != nil {
			match, err := knownRegex(*pat.Regex)
			if err != nil {
				return fmt.Errorf("%s: %w", child(where, "pattern"), err)
			}
			if c.Behavior != "Isolated" {
				return fmt.Errorf("%s: Split with a Regex pattern supports behavior Isolated only, got %q", where, c.Behavior)
			}
			p.steps = append(p.steps, regexStep(match))
			return nil
		}
		if *pat.String == "" {
			return fmt.Errorf("%s: empty String", child(where, "pattern"))
		}
		switch c.Behavior {
		case "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous":
		default:
			return fmt.Errorf("%s: behavior %q is not supported", where, c.Behavior)
		}
		p.steps = append(p.steps, stringSplitStep(*pat.String, c.Behavior))
		return nil
	}
	return fmt.Errorf("%s: type %q is not supported (only Split, ByteLevel, Digits and Sequence)", where, c.Type)
}

// matcher returns the length of the regex's match at s[i:] (s[i:] non-empty, the match never
// empty): the hand-written pattern engines of pretokenize.go.
type matcher func(s string, i int) int

// regexStep cuts s into the consecutive matches of a pattern that matches at every position
// (behavior Isolated).
func regexStep(match matcher) preStep {
	return func(s string, emit func(string)) {
		for i := 0; i < len(s); {
			n := match(s, i)
			emit(s[i : i+n])
			i += n
		}
	}
}

// knownRegex returns the engine of a Split regex. Go's regexp has no lookahead, so the patterns
// are implemented by hand, and only these are: Qwen2's, Llama 3's and GPT-2's.
func knownRegex(re string) (matcher, error) {
	switch re {
	case qwenPattern:
		return matchQwen, nil
	case llama3Pattern:
		return matchLlama3, nil
	case gpt2Pattern:
		return matchGPT2, nil
	}
	why := "no hand-written engine implements it"
	for _, c := range []string{"(?!", "(?=", "(?<!", "(?<="} {
		if strings.Contains(re, c) {
			why = fmt.Sprintf("its lookaround %s...) has no Go regexp equivalent and no hand-written engine implements it", c)
			break
		}
	}
	return nil, fmt.Errorf("regex %q is not supported: %s (supported: Qwen2's %q, Llama 3's %q, GPT-2's %q)",
		re, why, qwenPattern, llama3Pattern, gpt2Pattern)
}

// rustNumericSince16 are the numeric characters of Rust's char::is_numeric (the Unicode 17 tables
// of the Rust that built tokenizers 0.23.2) that the regex engine's Unicode 16 \p{N} lacks:
// Digits splits them off, the Split regexes do not. Measured with TestOracle_DigitsTable.
var rustNumericSince16 = &unicode.RangeTable{R32: []unicode.Range32{{0x11DE0, 0x11DE9, 1}, {0x16FF4, 0x16FF6, 1}}}

func isRustNumeric(r rune, cls uint8) bool {
	return cls&clsN != 0 || r >= 0x11DE0 && unicode.Is(rustNumericSince16, r)
}

// digitsStep is the Digits pre-tokenizer: numeric characters (Rust's char::is_numeric) are cut
// out one by one (individual) or as runs.
func digitsStep(individual bool) preStep {
	return func(s string, emit func(string)) {
		start := 0
		for i := 0; i < len(s); {
			r, w, cls := runeAt(s, i)
			if !isRustNumeric(r, cls) {
				i += w
				continue
			}
			if start < i {
				emit(s[start:i])
			}
			j := i + w
			if !individual {
				for j < len(s) {
					r2, w2, c2 := runeAt(s, j)
					if !isRustNumeric(r2, c2) {
						break
					}
					j += w2
				}
			}
			emit(s[i:j])
			i, start = j, j
		}
		if start < len(s) {
			emit(s[start:])
		}
	}
}

// stringSplitStep is Split with a String pattern, with HuggingFace's SplitDelimiterBehavior.
func stringSplitStep(delim, behavior string) preStep {
	type piece struct {
		start, end int
		match      bool
	}
	return func(s string, emit func(string)) {
		var pieces []piece
		prev := 0
		for i := 0; i <= len(s)-len(delim); {
			k := strings.Index(s[i:], delim)
			if k < 0 {
				break
			}
			k += i
			if prev < k {
				pieces = append(pieces, piece{prev, k, false})
			}
			pieces = append(pieces, piece{k, k + len(delim), true})
			i, prev = k+len(delim), k+len(delim)
		}
		if prev < len(s) {
			pieces = append(pieces, piece{prev, len(s), false})
		}
		var out []piece
		switch behavior {
		case "Removed":
			for _, p := range pieces {
				if !p.match {
					out = append(out, p)
				}
			}
		case "Isolated":
			out = pieces
		case "MergedWithPrevious":
			prevMatch := false
			for _, p := range pieces {
				if p.match && !prevMatch && len(out) > 0 {
					out[len(out)-1].end = p.end
				} else {
					out = append(out, piece{p.start, p.end, false})
				}
				prevMatch = p.match
			}
		case "MergedWithNext":
			prevMatch := false
			for k := len(pieces) - 1; k >= 0; k-- {
				p := pieces[k]
				if p.match && !prevMatch && len(out) > 0 {
					out[len(out)-1].start = p.start
				} else {
					out = append(out, piece{p.start, p.end, false})
				}
				prevMatch = p.match
			}
			for a, b := 0, len(out)-1; a < b; a, b = a+1, b-1 {
				out[a], out[b] = out[b], out[a]
			}
		case "Contiguous":
			prevMatch := false
			for _, p := range pieces {
				if p.match && prevMatch {
					out[len(out)-1].end = p.end
				} else {
					out = append(out, p)
				}
				prevMatch = p.match
			}
		}
		for _, p := range out {
			if p.start < p.end {
				emit(s[p.start:p.end])
			}
		}
	}
}

// ---- post-processor ----

// buildPostProcessor returns the special-token ids the post-processor puts before and after a
// single sequence (encode with add_special_tokens=True): TemplateProcessing's "single", ByteLevel
// (offsets only, no ids) or a Sequence of them.
func buildPostProcessor(c *component, where string, vocab func(string) (int, bool)) (prefix, suffix []int, err error) {
	if c == nil {
		return nil, nil, nil
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil, nil
	case "Sequence":
		for i := range c.Processors {
			p, s, err := buildPostProcessor(&c.Processors[i], child(where, fmt.Sprintf("processors[%d]", i)), vocab)
			if err != nil {
				return nil, nil, err
			}
			if len(p)+len(s) > 0 && len(prefix)+len(suffix) > 0 {
				return nil, nil, fmt.Errorf("%s: two processors add special tokens", where)
			}
			prefix, suffix = append(prefix, p...), append(suffix, s...)
		}
		return prefix, suffix, nil
	case "TemplateProcessing":
		seen := false
		for i, item := range c.Single {
			switch {
			case item.Sequence != nil:
				if item.Sequence.ID != "A" || seen {
					return nil, nil, fmt.Errorf("%s: want one Sequence A", child(where, fmt.Sprintf("single[%d]", i)))
				}
				seen = true
			case item.SpecialToken != nil:
				st, ok := c.SpecialTokens[item.SpecialToken.ID]
				if !ok || len(st.IDs) == 0 {
					return nil, nil, fmt.Errorf("%s: special token %q is not in special_tokens", child(where, fmt.Sprintf("single[%d]", i)), item.SpecialToken.ID)
				}
				if len(st.IDs) == 1 {
					if id, ok := vocab(item.SpecialToken.ID); !ok || id != st.IDs[0] {
						return nil, nil, fmt.Errorf("%s: special token %q has id %d but the vocabulary gives %d", child(where, fmt.Sprintf("single[%d]", i)), item.SpecialToken.ID, st.IDs[0], id)
					}
				}
				if seen {
					suffix = append(suffix, st.IDs...)
				} else {
					prefix = append(prefix, st.IDs...)
				}
			default:
				return nil, nil, fmt.Errorf("%s: want SpecialToken or Sequence", child(where, fmt.Sprintf("single[%d]", i)))
			}
		}
		if !seen {
			return nil, nil, fmt.Errorf("%s: no Sequence A", child(where, "single"))
		}
		return prefix, suffix, nil
	}
	return nil, nil, fmt.Errorf("%s: type %q is not supported (only ByteLevel, TemplateProcessing or Sequence)", where, c.Type)
}

// ---- decoder ----

// decStep is one decoder of a chain: HuggingFace's decode_chain on the tokens.
type decStep func(tokens []string) []string

// buildDecoder returns the decoder chain; byteLevel is true when the decoder is ByteLevel alone
// (Decode's fast path).
func buildDecoder(c *component, where string) (steps []decStep, byteLevel bool, err error) {
	if c == nil {
		return nil, false, fmt.Errorf("%s: missing", where)
	}
	switch c.Type {
	case "ByteLevel":
		return []decStep{decodeByteLevel}, true, nil
	case "Sequence":
		for i := range c.Decoders {
			s, _, err := buildDecoder(&c.Decoders[i], child(where, fmt.Sprintf("decoders[%d]", i)))
			if err != nil {
				return nil, false, err
			}
			steps = append(steps, s...)
		}
		return steps, false, nil
	case "Replace":
		p, err := parsePattern(c.Pattern)
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", where, err)
		}
		if p.String == nil || *p.String == "" || c.Content == nil {
			return nil, false, fmt.Errorf("%s: Replace supports a non-empty String pattern only", where)
		}
		from, to := *p.String, *c.Content
		return []decStep{func(toks []string) []string {
			for i, t := range toks {
				toks[i] = strings.ReplaceAll(t, from, to)
			}
			return toks
		}}, false, nil
	case "ByteFallback":
		return []decStep{decodeByteFallback}, false, nil
	case "Fuse":
		return []decStep{func(toks []string) []string { return []string{strings.Join(toks, "")} }}, false, nil
	case "Strip":
		if c.Content == nil || utf8.RuneCountInString(*c.Content) != 1 {
			return nil, false, fmt.Errorf("%s: Strip needs a one-character content", where)
		}
		r, _ := utf8.DecodeRuneInString(*c.Content)
		start, stop := c.Start, c.Stop
		return []decStep{func(toks []string) []string {
			for i, t := range toks {
				toks[i] = stripRune(t, r, start, stop)
			}
			return toks
		}}, false, nil
	}
	return nil, false, fmt.Errorf("%s: type %q is not supported (only ByteLevel, Replace, ByteFallback, Fuse, Strip or Sequence)", where, c.Type)
}

// stripRune removes up to start leading and stop trailing runes r from t (HF's Strip decoder).
func stripRune(t string, r rune, start, stop int) string {
	for ; start > 0; start-- {
		c, w := utf8.DecodeRuneInString(t)
		if c != r || w == 0 {
			break
		}
		t = t[w:]
	}
	for ; stop > 0; stop-- {
		c, w := utf8.DecodeLastRuneInString(t)
		if c != r || w == 0 {
			break
		}
		t = t[:len(t)-w]
	}
	return t
}

func decodeByteLevel(toks []string) []string {
	var buf []byte
	for _, t := range toks {
		buf = appendTokenBytes(buf, t)
	}
	return []string{lossyString(buf)}
}

// decodeByteFallback turns runs of <0xNN> tokens into their bytes: the run's string when it is
// valid UTF-8, else one U+FFFD per byte, as HuggingFace's ByteFallback decoder does.
func decodeByteFallback(toks []string) []string {
	out := make([]string, 0, len(toks))
	var run []byte
	flush := func() {
		if len(run) == 0 {
			return
		}
		if utf8.Valid(run) {
			out = append(out, string(run))
		} else {
			for range run {
				out = append(out, "\uFFFD")
			}
		}
		run = run[:0]
	}
	for _, t := range toks {
		if b, ok := byteToken(t); ok {
			run = append(run, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// byteToken parses a byte-fallback token "<0xNN>" as Rust's u8::from_str_radix(&t[3..5], 16)
// does (which also takes "+F").
func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimPrefix(t[3:5], "+"), 16, 8)
	if err != nil || t[3] == '-' {
		return 0, false
	}
	return byte(v), true
}
