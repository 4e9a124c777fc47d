package extreward

import (
	"math/big"
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// math_verify 0.8.0's extraction regexes (parser.py), in RE2: look-behinds are checked after the
// match (acceptLatex) or dropped where the preceding anchor already implies them.

// envRE is make_latex_env_pattern(prefix, context): $$…$$, \[…\], $…$, \(…\), " […] " and, in
// plain context, a bare \frac{n}{m}; boxed context requires a \boxed{…} inside.
func envRE(prefix string, boxed bool) string {
	dd, db, id, ip, ib := `(?:[^$]|\$[^$])`, `(?:[^\\]|\\[^\]])`, `(?:\\\$|[^\n$])`, `(?:[^\\\n]|\\[^)])`, `[^\n\]\[]`
	wrap := func(c string) string {
		if boxed {
			return c + `*?\\boxed\{` + c + `+?\}` + c + `*?`
		}
		return c + `+?`
	}
	g := func(name string) string { return `(?P<` + prefix + `_` + name + `>` }
	alts := []string{
		`\$\$` + g("latexDisplayDollar") + wrap(dd) + `)\$\$`,
		`\\\[` + g("latexDisplayBracket") + wrap(db) + `)\\\]`,
		`\$` + g("latexInlineDollar") + wrap(id) + `)\$`,
		`\\\(` + g("latexInlineParenthesis") + wrap(ip) + `)\\\)`,
		`\s\[` + g("latexInlineBracket") + wrap(ib) + `)\]\s`,
	}
	if !boxed {
		n := `-?\d+(?:[.,]\d+)?`
		alts = append(alts, g("latexFraction")+`-?\\frac\{`+n+`\}\{`+n+`\})`)
	}
	return `(?:(?:` + strings.Join(alts, "|") + `)\s*` + g("percent") + `\\?%|[Pp]ercent|[Pp]ercentage|[Pp]ct)?)`
}

// envsRE is up to six environments joined by "and", "or" or commas.
func envsRE(boxed bool) string {
	var b strings.Builder
	b.WriteString(envRE("first", boxed))
	for i := 1; i <= 5; i++ {
		b.WriteString(`(?:\s*(?:,?and|,?or|,)\s*` + envRE("next"+string(rune('0'+i)), boxed) + `)?`)
	}
	return b.String()
}

// latexPatterns is lazy_latex_regex: boxedPriority 50 by default, 0 in accuracy_reward;
// anchorless adds plain LaTeX at 300.
func latexPatterns(boxedPriority int, anchorless bool) []pattern {
	envs := envsRE(false)
	mk := func(re string, pr int) pattern {
		return pattern{re: regexp.MustCompile(`(?s)` + re), priority: pr, latex: true}
	}
	ps := []pattern{
		mk(`(?i:final answer is):?\s*`+envs+`\.?\s?I hope`, 0),
		mk(`(?i:final answer.{0,100}?)\s+is:?\s*`+envs, 50),
		mk(`(?i:answer):.{0,50}?`+envs, 100),
		mk(`(?i:answer).{0,50}?`+envs, 200),
	}
	if anchorless {
		ps = append(ps, mk(envs, 300))
	}
	return append(ps, mk(envsRE(true), boxedPriority), mk(`(?P<first_latexBoxed>\\boxed\{.+\})`, boxedPriority))
}

// exprPatterns is lazy_expr_regex with try_extract_without_anchor.
func exprPatterns() []pattern {
	number := `(?:(?P<integer1>-?[1-9]\d{0,2}(?:[ ,]\d{3})+)(?P<decimal1>\.\d+)?|(?P<integer2>-?\d+)(?P<decimal2>[.,]\d+)|(?P<decimal3>\.\d+)|(?P<integer3>-?\d+))(?P<percent>\s*(?:%|[Pp]ercent|\s*[Pp]ercentage|\s*[Pp]ct))?`
	ops := `+\-*×/^()÷`
	chars := `[\d.\s` + ops + `]`
	expr := `(?P<expr>-?\(?-?\d` + chars + `*[` + ops + `]` + chars + `+\)?)`
	prefix := `(?:^|\s|=)(?:\*\*)?`
	suffix := `(?:\*\*)?(?:\.|,|:|\s|\)|\$|$)`
	currency := `[$€£¥₹₽₪₩₫฿₡₢₣₤₥₦₧₨₭₮₯₰₱₲₳₴₵₶₷₸₺₻₼₾₿]`
	withAnchors := `(?:` + prefix + expr + suffix + `)`
	numberAnchors := `(?:` + prefix + currency + `?` + number + `)`
	either := `(?:` + withAnchors + `|` + numberAnchors + `)`
	mk := func(re string, pr int) pattern { return pattern{re: regexp.MustCompile(re), priority: pr} }
	answer := func(re string, pr int) pattern { p := mk(re, pr); p.notBeforeEq = true; return p }
	return []pattern{
		mk(`(?i:final answer is):?\s*`+either+`\.?\s?I hope`, 0),
		mk(`(?i:final answer.{0,100}?)\s+is:?`+either, 50),
		answer(`(?i:answer):(?:.{0,100}=\s*|.{0,50}?)`+either, 100),
		answer(`(?i:answer)(?:.{0,100}=\s*|.{0,50}?)`+either, 200),
		mk(withAnchors, 300),
		mk(numberAnchors, 300),
	}
}

var (
	patternsOnce         sync.Once
	goldPats, answerPats []pattern
)

func makePatterns() {
	// parse()'s default [LatexExtractionConfig(), ExprExtractionConfig()], by priority (stable).
	goldPats = byPriority(append(latexPatterns(50, true), exprPatterns()...))
	// accuracy_reward's LatexExtractionConfig(boxed_match_priority=0, try_extract_without_anchor=False).
	answerPats = byPriority(latexPatterns(0, false))
}

func byPriority(ps []pattern) []pattern {
	out := make([]pattern, 0, len(ps))
	for _, pr := range []int{0, 50, 100, 200, 300} {
		for _, p := range ps {
			if p.priority == pr {
				out = append(out, p)
			}
		}
	}
	return out
}

func goldPatterns() []pattern   { patternsOnce.Do(makePatterns); return goldPats }
func answerPatterns() []pattern { patternsOnce.Do(makePatterns); return answerPats }

// acceptLatex checks the look-behinds of the dollar environments: an opening $ not escaped and
// not after a digit ("costs 5$"), an opening $$ not escaped.
func acceptLatex(s string, re *regexp.Regexp, loc []int) bool {
	for k, name := range re.SubexpNames() {
		if k == 0 || loc[2*k] < 0 {
			continue
		}
		start := loc[2*k]
		switch {
		case strings.HasSuffix(name, "_latexInlineDollar"):
			if start >= 2 && (s[start-2] == '\\' || s[start-2] >= '0' && s[start-2] <= '9') {
				return false
			}
		case strings.HasSuffix(name, "_latexDisplayDollar"):
			if start >= 3 && s[start-3] == '\\' {
				return false
			}
		}
	}
	return true
}

// ---- normalize_latex (latex2sympy2_extended 1.10.2, math_normalization.py) ----

// extractBoxed is extract_boxed_content: the \boxed{…} (or \fbox{…}) contents from the right;
// mode "last" keeps earlier ones only while they are close (under 10 characters between) or
// separated by and/or/,/; within 70 characters; joined by commas.
func extractBoxed(text string, last bool) string {
	var results []string
	current, maxPos, lastStart := len(text), len(text), -1
	for {
		bi := strings.LastIndex(text[:current], `\boxed`)
		fi := strings.LastIndex(text[:current], `\fbox`)
		if bi < 0 && fi < 0 {
			break
		}
		start, end := bi, bi+6
		if fi > bi {
			start, end = fi, fi+5
		}
		next := end
		for next < maxPos && unicode.IsSpace(rune(text[next])) {
			next++
		}
		if next >= maxPos {
			break
		}
		if text[next] != '{' {
			if len(results) == 0 {
				results = append(results, text[next:])
			}
			break
		}
		depth, close := 1, -1
		for i := next + 1; i < maxPos; i++ {
			if text[i] == '{' {
				depth++
			} else if text[i] == '}' {
				depth--
				if depth == 0 {
					close = i
					break
				}
			}
		}
		if close < 0 {
			if len(results) == 0 {
				results = append(results, text[next:])
			}
			break
		}
		content := strings.TrimSpace(text[next+1 : close])
		if last && lastStart >= 0 {
			between := text[close+1 : lastStart]
			ok := len(between) < 10 ||
				len(results) > 0 && content != results[len(results)-1] && len(between) < 70 && separator.MatchString(between)
			if !ok {
				break
			}
		}
		results = append(results, content)
		lastStart, maxPos, current = start, start, start
	}
	if len(results) == 0 {
		return text
	}
	for i, j := 0, len(results)-1; i < j; i, j = i+1, j-1 {
		results[i], results[j] = results[j], results[i]
	}
	return strings.Join(results, ",")
}

var (
	separator    = regexp.MustCompile(`and|or|,|;`)
	rLeft        = regexp.MustCompile(`\\m?left(\\\{|\{|\\\||\||\[|\(|\\rbracl|\\lgroup|\\lbrace|\\lbrack|\\vert|\\lvert|\\lceil|\\lfloor|\\vert|\\lvert|\\langle|\\llcorner|\\ulcorner)`)
	rRight       = regexp.MustCompile(`\\m?right(\\\}|\}|\\\||\||\]|\)|\\rbrack|\\rgroup|\\rbrace|\\rbrack|\\vert|\\rvert|\\rceil|\\rfloor|\\vert|\\rvert|\\rangle|\\lrcorner|\\urcorner)`)
	permutation  = regexp.MustCompile(`\(([a-zA-Z0-9+\-*/\\ ]+?)\)_\{([a-zA-Z0-9+\-*/\\ ]+?)\}`)
	toRemove     = regexp.MustCompile(`\\mathrm\{th\}|\\!\s*|\\text\s*\{\s*\}|\\\$|\$|\\displaystyle|\\["']|["']`)
	toReplace    = regexp.MustCompile(`(?P<math>\\math(?:rm|it|bf))|(?P<text>\\text(?:normal|bf|it|rm))|(?P<frac>\\(?:d|t|c)frac)|(?P<decimal_space>\s\.)|(?P<decimal_brace>\{\.)|(?P<approx>~=)|(?P<comma>\s*\{\s*,\s*\})|(?P<and_or>,?\s*(?:and|or))|(?P<and_or_text>,?\s*\\text\{\s*(?:and|or)\s*\})|(?P<backslash_space>\\\s)|(?P<infinity>infinity)|(?P<dot>,?\\ldots)|(?P<percentage>\s*percentage)|(?P<percentage_in_text>\\text\{percentage\})|(?P<percent>\s*percent)|(?P<percent_in_text>\\text\{percent\})|(?P<pct>\s*pct)|(?P<pct_in_text>\\text\{pct\})|(?P<inf>inf)|(?P<sqrt> sqrt)`)
	replacements = map[string]string{
		"math": `\text`, "text": `\text`, "frac": `\frac`, "decimal_space": " 0.", "decimal_brace": "{0.",
		"approx": `\approx`, "comma": ",", "and_or": ",", "and_or_text": ",", "backslash_space": " ",
		"infinity": `\infty`, "dot": " ", "percentage": `\%`, "percentage_in_text": `\%`, "percent": `\%`,
		"percent_in_text": `\%`, "pct": `\%`, "pct_in_text": `\%`, "inf": `\infty`, "sqrt": `\sqrt`,
	}
	unitSuperscript = regexp.MustCompile(`(\\(?:text|mbox)\{.*?\})(\^\d|\{\^\d\})?$`)
	units           = regexp.MustCompile(`(\d|\}|\s)\s*(?:` + strings.Join(unitNames, "|") + `)(?:s|es)?\s*$`)
	malformed       = []struct {
		re  *regexp.Regexp
		rep string
	}{
		{regexp.MustCompile(`\^\s?\((.*?)\)`), `^{$1}`},
		{regexp.MustCompile(`sqrt\s?\((.*?)\)`), `\sqrt{$1}`},
		{regexp.MustCompile(`\\frac\s?(\d)\s?(\d+)`), `\frac{$1}{$2}`},
		{regexp.MustCompile(`\\log_\s?(\d)\s?(\d+)`), `\log_{$1}{$2}`},
		{regexp.MustCompile(`\\frac\s?\{(.*?)\}\s?(\d)`), `\frac{$1}{$2}`},
		{regexp.MustCompile(`\\frac\s?(\d)\s?\{(.*?)\}`), `\frac{$1}{$2}`},
		{regexp.MustCompile(`\\sqrt\s?(\d)`), `\sqrt{$1}`},
	}
)

// unitNames is math_normalization.py's units list as it is ("integer" "point" included).
var unitNames = []string{"integerpoint", "feet", "sue", "digit", "pound", "meal", "edge", "student",
	"children ticket", "multiple", "east", "degree", "mph", "kmph", "ft", "m square", " m east", "sq m",
	"deg", "mile", "q .", "monkey", "prime", "ratio", "profit of rs", "rd", "o", "gm", "p . m", "lb",
	"tile", "per", "dm", "lt", "gain", "ab", "way", "west", "a .", "b .", "c .", "d .", "e .", "f .",
	"g .", "h .", "t", "h", "no change", "men", "soldier", "pie", "bc", "excess", "st", "inches", "noon",
	"cent", "by", "gal", "kmh", "c", "acre", "rise", "a . m", "th", "π r 2", "sq", "mark", "l", "toy",
	"coin", "sq . m", "gallon", "° f", "profit", "minw", "yr", "women", "am", "pm", "hr", "cu cm",
	"square", "v â € ™", "are", "rupee", "rounds", "cubic", "cc", "mtr", "s", "ohm", "number", "kmph",
	"day", "hour", "minute", "min", "second", "man", "woman", "sec", "cube", "mt", "sq inch", "mp",
	"∏ cm ³", "hectare", "more", "sec", "unit", "cu . m", "cm 2", "rs .", "rs", "kg", "g", "month", "km",
	"m", "cm", "mm", "apple", "liter", "loss", "yard", "pure", "year", "increase", "decrease", "d",
	"less", "Surface", "litre", "pi sq m", "s .", "metre", "meter", "inch"}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// normalizeLatex is normalize_latex with basic_latex and units on, boxed "all" ("last" for a plain
// \boxed match), and nits and malformed operators as cfg says.
func normalizeLatex(text string, lastBoxed bool, cfg normConfig) string {
	text = extractBoxed(text, lastBoxed)
	text = strings.NewReplacer(`\mathrm{T}`, "T", `\mathrm{d}`, "d", `{\rm d}`, "d",
		`\left[\begin{matrix}`, `\begin{bmatrix}`, `\end{matrix}\right]`, `\end{bmatrix}`).Replace(text)
	text = rLeft.ReplaceAllString(text, "$1")
	text = rRight.ReplaceAllString(text, "$1")
	text = permutation.ReplaceAllString(text, `\frac{($1)!}{(($1)-($2))!}`)
	text = toRemove.ReplaceAllStringFunc(text, func(m string) string {
		if m == `\"` || m == `\'` {
			return m
		}
		return ""
	})
	text = replaceInLatex(text)
	text = strings.NewReplacer("\n", " ", "\t", " ").Replace(text)
	if !strings.Contains(text, "matrix") {
		var b strings.Builder
		for i := 0; i < len(text); i++ {
			if text[i] == '\\' && i+2 < len(text) && text[i+1] == '\\' && isLetter(text[i+2]) {
				continue
			}
			b.WriteByte(text[i])
		}
		text = b.String()
	}
	if t := strings.TrimSpace(unitSuperscript.ReplaceAllString(text, "")); t != "" && t != text {
		text = t
	}
	for range 2 {
		if t := units.ReplaceAllString(text, "$1"); t != "" && t != text {
			text = t
		}
	}
	if cfg.nits {
		if strings.HasPrefix(text, ".") {
			text = "0" + text
		}
		if text == "0.5" {
			text = `\frac{1}{2}`
		}
	}
	if cfg.malformed {
		for _, m := range malformed {
			text = m.re.ReplaceAllString(text, m.rep)
		}
		text = strings.ReplaceAll(text, " sqrt", `\sqrt`)
		text = fixSqrt(text)
		text = fixFracs(text)
		text = fixASlashB(text)
	}
	return text
}

// replaceInLatex is replace_in_latex, the look-arounds checked by hand: "and"/"or" not inside a
// word, "\ " not after a backslash, "inf" not after a backslash nor followed by "inity".
func replaceInLatex(text string) string {
	names := toReplace.SubexpNames()
	var b strings.Builder
	last := 0
	for _, loc := range toReplace.FindAllStringSubmatchIndex(text, -1) {
		name := ""
		for k := 1; k < len(names); k++ {
			if loc[2*k] >= 0 {
				name = names[k]
				break
			}
		}
		s, e := loc[0], loc[1]
		ok := true
		switch name {
		case "and_or":
			ok = (s == 0 || !isLetter(text[s-1])) && (e == len(text) || !isLetter(text[e]))
		case "backslash_space":
			ok = s == 0 || text[s-1] != '\\'
		case "inf":
			ok = (s == 0 || text[s-1] != '\\') && !strings.HasPrefix(text[e:], "inity")
		}
		b.WriteString(text[last:s])
		if ok {
			b.WriteString(replacements[name])
		} else {
			b.WriteString(text[s:e])
		}
		last = e
	}
	b.WriteString(text[last:])
	return b.String()
}

// fixSqrt is _fix_sqrt: \sqrt3 → \sqrt{3}.
func fixSqrt(text string) string {
	if !strings.Contains(text, `\sqrt`) {
		return text
	}
	parts := strings.Split(text, `\sqrt`)
	out := parts[0]
	for _, p := range parts[1:] {
		p = strings.TrimLeftFunc(p, unicode.IsSpace)
		if p != "" && p[0] != '{' && p[0] != '[' {
			_, n := firstRune(p)
			out += `\sqrt{` + p[:n] + "}" + p[n:]
		} else {
			out += `\sqrt` + p
		}
	}
	return out
}

func firstRune(s string) (rune, int) {
	for i, r := range s {
		if i > 0 {
			return r, i
		}
	}
	return 0, len(s)
}

// fixFracs is _fix_fracs: \frac12 → \frac{1}{2}, \frac1{2} → \frac{1}{2}.
func fixFracs(text string) string {
	parts := strings.Split(text, `\frac`)
	out := parts[0]
	for _, p := range parts[1:] {
		p = strings.TrimLeftFunc(p, unicode.IsSpace)
		out += `\frac`
		rs := []rune(p)
		switch {
		case len(rs) > 0 && rs[0] == '{':
			out += p
		case len(rs) < 2:
			return text
		case rs[1] != '{':
			out += "{" + string(rs[0]) + "}{" + string(rs[1]) + "}" + string(rs[2:])
		default:
			out += "{" + string(rs[0]) + "}" + string(rs[1:])
		}
	}
	return out
}

// fixASlashB is _fix_a_slash_b: "2/3" (two integers, as written) → \frac{2}{3}.
func fixASlashB(text string) string {
	a, b, ok := strings.Cut(text, "/")
	if !ok || strings.Contains(b, "/") {
		return text
	}
	x, okA := new(big.Int).SetString(strings.TrimSpace(a), 10)
	y, okB := new(big.Int).SetString(strings.TrimSpace(b), 10)
	if !okA || !okB || text != x.String()+"/"+y.String() {
		return text
	}
	return `\frac{` + x.String() + "}{" + y.String() + "}"
}
