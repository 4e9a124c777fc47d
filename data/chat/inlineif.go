package chat

import (
	"fmt"
	"strings"

	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// gonja (v2.9.1) parses a conditional expression "A if C else B" only at the top of {{ ... }}
// and {% set %}; inside brackets, such as Gemma 3's
//
//	{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
//
// it fails with "Unbalanced parenthesis". rewriteNestedIfs rewrites every conditional inside (),
// [] or {} (call arguments and keyword arguments included) to the equivalent
//
//	((C) and [A] or [B])[0]
//
// which gonja does parse: "and"/"or" short-circuit and return an operand, as in Python, and the
// one-element list [A] is always true, so C is evaluated once with Jinja's truthiness and only
// the chosen branch is evaluated. A conditional without "else" inside brackets is an error.
// Templates without nested conditionals are returned unchanged.
func rewriteNestedIfs(src string, cfg *config.Config) (string, error) {
	if !strings.Contains(src, "if") {
		return src, nil
	}
	src = strings.ReplaceAll(strings.ReplaceAll(src, "\r\n", "\n"), "\r", "\n") // as gonja's lexer does
	var toks []*tokens.Token
	for s := tokens.LexAll(src, cfg); ; s.Next() {
		t := s.Current()
		if t.Type == tokens.Error {
			return src, nil // gonja reports it
		}
		toks = append(toks, t)
		if t.Type == tokens.EOF {
			break
		}
	}
	r := &ifRewriter{src: src, toks: toks}
	var b strings.Builder
	last := 0 // source offset copied so far
	for i := 0; i < len(toks); i++ {
		if t := toks[i].Type; t != tokens.VariableBegin && t != tokens.BlockBegin {
			continue
		}
		end := i + 1
		for end < len(toks) && toks[end].Type != tokens.VariableEnd && toks[end].Type != tokens.BlockEnd && toks[end].Type != tokens.EOF {
			end++
		}
		if end >= len(toks) || toks[end].Type == tokens.EOF || end == i+1 {
			break
		}
		text, err := r.plain(i+1, end)
		if err != nil {
			return "", err
		}
		b.WriteString(src[last:toks[i+1].Pos])
		b.WriteString(text)
		last = toks[end].Pos
		i = end
	}
	if !r.changed {
		return src, nil
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

type ifRewriter struct {
	src     string
	toks    []*tokens.Token
	changed bool
}

// text is the source of tokens [lo, hi), with the whitespace after each.
func (r *ifRewriter) text(lo, hi int) string { return r.src[r.toks[lo].Pos:r.toks[hi].Pos] }

func isOpener(t tokens.Type) bool {
	return t == tokens.LeftParenthesis || t == tokens.LeftBracket || t == tokens.LeftBrace
}

func isCloser(t tokens.Type) bool {
	return t == tokens.RightParenthesis || t == tokens.RightBracket || t == tokens.RightBrace
}

// closing returns the index of the bracket closing the one at i, or -1.
func (r *ifRewriter) closing(i, hi int) int {
	depth := 0
	for j := i; j < hi; j++ {
		switch t := r.toks[j].Type; {
		case isOpener(t):
			depth++
		case isCloser(t):
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// plain copies tokens [lo, hi), rewriting inside the brackets it contains.
func (r *ifRewriter) plain(lo, hi int) (string, error) {
	var b strings.Builder
	for i := lo; i < hi; i++ {
		if !isOpener(r.toks[i].Type) {
			b.WriteString(r.text(i, i+1))
			continue
		}
		j := r.closing(i, hi)
		if j < 0 {
			return "", fmt.Errorf("parse chat template: unbalanced %q at line %d", r.toks[i].Val, r.toks[i].Line)
		}
		inner, err := r.items(i+1, j)
		if err != nil {
			return "", err
		}
		b.WriteString(r.text(i, i+1) + inner + r.text(j, j+1))
		i = j
	}
	return b.String(), nil
}

// items rewrites the inside of a bracket: its items, between separators (, : =), each possibly
// a conditional.
func (r *ifRewriter) items(lo, hi int) (string, error) {
	var b strings.Builder
	start := lo
	for i := lo; i <= hi; i++ {
		if i < hi && isOpener(r.toks[i].Type) {
			if i = r.closing(i, hi); i < 0 {
				return "", fmt.Errorf("parse chat template: unbalanced bracket at line %d", r.toks[lo].Line)
			}
			continue
		}
		if i < hi {
			if t := r.toks[i].Type; t != tokens.Comma && t != tokens.Colon && t != tokens.Assign {
				continue
			}
		}
		item, err := r.item(start, i)
		if err != nil {
			return "", err
		}
		b.WriteString(item)
		if i < hi {
			b.WriteString(r.text(i, i+1))
		}
		start = i + 1
	}
	return b.String(), nil
}

// item rewrites one bracket item [lo, hi): "A if C else B" (B possibly a conditional itself).
func (r *ifRewriter) item(lo, hi int) (string, error) {
	ifAt, elseAt := -1, -1
	for i := lo; i < hi; i++ {
		t := r.toks[i]
		if isOpener(t.Type) {
			if i = r.closing(i, hi); i < 0 {
				return "", fmt.Errorf("parse chat template: unbalanced %q at line %d", t.Val, t.Line)
			}
			continue
		}
		if t.Type == tokens.Name && t.Val == "if" && ifAt < 0 && i > lo {
			ifAt = i
		} else if t.Type == tokens.Name && t.Val == "else" && ifAt >= 0 {
			elseAt = i
			break
		}
	}
	if ifAt < 0 {
		if lo == hi {
			return "", nil
		}
		return r.plain(lo, hi)
	}
	if elseAt < 0 {
		return "", fmt.Errorf("parse chat template: a conditional without else inside brackets (line %d) is not supported", r.toks[ifAt].Line)
	}
	if elseAt+1 >= hi {
		return "", fmt.Errorf("parse chat template: else without an expression at line %d", r.toks[elseAt].Line)
	}
	a, err := r.plain(lo, ifAt)
	if err != nil {
		return "", err
	}
	c, err := r.plain(ifAt+1, elseAt)
	if err != nil {
		return "", err
	}
	alt, err := r.item(elseAt+1, hi)
	if err != nil {
		return "", err
	}
	r.changed = true
	return fmt.Sprintf("((%s) and [%s] or [%s])[0]", strings.TrimSpace(c), strings.TrimSpace(a), strings.TrimSpace(alt)) + trailingSpace(alt), nil
}

func trailingSpace(s string) string { return s[len(strings.TrimRight(s, " \t\n")):] }
