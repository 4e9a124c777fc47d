package extreward

import (
	"math/big"
	"regexp"
	"strings"
)

// The arithmetic latex2sympy and sympy's parse_expr read (latex2sympy reads 2^10 as 2¹⁰), evaluated exactly: numbers, + − × ÷ /,
// integer powers, \frac, square roots of perfect squares, percentages, parentheses and braces;
// top-level commas as a finite set; "=" as an equation. Anything else — letters, other commands,
// juxtaposed factors (latex2sympy reads "1\,000" as 1·0) — is undecided here.

var thousands = regexp.MustCompile(`^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$`)

// parseLatex parses a normalised LaTeX answer.
func parseLatex(s string) (value, tri) {
	s = strings.TrimSpace(s)
	if s == "" {
		return value{}, no
	}
	if strings.ContainsAny(s, "<>;") || strings.Contains(s, `\le`) || strings.Contains(s, `\ge`) ||
		strings.Contains(s, `\ne`) || strings.Contains(s, `\approx`) {
		return value{}, undecided
	}
	if parts := splitTop(s, '='); len(parts) > 1 {
		for _, p := range parts {
			if strings.Contains(p, ",") {
				return value{}, undecided
			}
		}
		lhs := strings.TrimSpace(parts[0])
		v, st := parseLatexSet(parts[len(parts)-1])
		if st != yes || v.set {
			return value{}, undecided
		}
		for _, p := range parts[1 : len(parts)-1] {
			if _, st := parseArith(p, true); st != yes {
				return value{}, undecided
			}
		}
		assign := lhs != "" && strings.IndexFunc(lhs, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') }) < 0
		if !assign {
			if _, st := parseArith(lhs, true); st != yes {
				return value{}, undecided
			}
		}
		v.eq, v.assign = true, assign
		if assign {
			v.lhs = lhs
		}
		return v, yes
	}
	return parseLatexSet(s)
}

// parseLatexSet parses a number or a comma-separated set of them ("1,000" being a thousand).
func parseLatexSet(s string) (value, tri) {
	s = strings.TrimSpace(s)
	if thousands.MatchString(s) {
		return parseArith(strings.ReplaceAll(s, ",", ""), true)
	}
	parts := splitTop(s, ',')
	if len(parts) == 1 {
		return parseArith(s, true)
	}
	set := value{set: true}
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if len(strings.TrimLeft(p, "0123456789")) == 0 && len(p) == 3 {
			return value{}, undecided // a digit group of a number latex2sympy may join
		}
		v, st := parseArith(p, true)
		if st != yes {
			return value{}, undecided
		}
		set.nums = append(set.nums, v.nums...)
	}
	return set, yes
}

// splitTop splits s at sep outside braces and parentheses.
func splitTop(s string, sep byte) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '{', '(', '[':
			depth++
		case '}', ')', ']':
			depth--
		case sep:
			if depth == 0 && (i == 0 || s[i-1] != '\\') {
				out = append(out, s[last:i])
				last = i + 1
			}
		}
	}
	return append(out, s[last:])
}

// parsePlainExpr parses math_verify's plain expression ("1/3", "2.5 + 1") as sympy's
// parse_expr(evaluate=False) would, ^ being a power.
func parsePlainExpr(s string) (value, tri) {
	if strings.ContainsAny(s, "×÷") {
		return value{}, undecided
	}
	return parseArith(s, false)
}

// arith is a recursive-descent parser of one expression.
type arith struct {
	s     string
	i     int
	latex bool
	bad   tri // set when the input leaves the subset (undecided) or cannot parse (no)
}

func parseArith(s string, latex bool) (value, tri) {
	p := &arith{s: s, latex: latex, bad: yes}
	x, ok := p.expr()
	p.space()
	if p.bad != yes {
		return value{}, p.bad
	}
	if !ok || p.i < len(p.s) {
		return value{}, undecided
	}
	return value{nums: []num{x}}, yes
}

func (p *arith) fail(t tri) (num, bool) {
	if p.bad == yes {
		p.bad = t
	}
	return num{}, false
}

func (p *arith) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// eat consumes tok (after spaces) when it is next.
func (p *arith) eat(tok string) bool {
	p.space()
	if strings.HasPrefix(p.s[p.i:], tok) {
		// a command must not run on into letters (\cdots is no \cdot)
		if tok[0] == '\\' && len(p.s) > p.i+len(tok) && isLetter(p.s[p.i+len(tok)]) {
			return false
		}
		p.i += len(tok)
		return true
	}
	return false
}

func (p *arith) expr() (num, bool) {
	x, ok := p.term()
	for ok {
		switch {
		case p.eat("+"):
			y, ok2 := p.term()
			if !ok2 || twoIrrational(x, y) {
				return p.fail(undecided)
			}
			x = combine(new(big.Rat).Add(x.v, y.v), x, y)
		case p.eat("-"):
			y, ok2 := p.term()
			if !ok2 || twoIrrational(x, y) {
				return p.fail(undecided)
			}
			x = combine(new(big.Rat).Sub(x.v, y.v), x, y)
		default:
			return x, true
		}
	}
	return num{}, false
}

func (p *arith) term() (num, bool) {
	x, ok := p.unary()
	for ok {
		var mul bool
		switch {
		case p.eat(`\cdot`), p.eat(`\times`), p.eat("*"):
			mul = true
		case p.eat(`\div`), p.eat("/"):
		default:
			return x, true
		}
		y, ok2 := p.unary()
		if !ok2 || twoIrrational(x, y) {
			return p.fail(undecided)
		}
		if mul && (!x.irr && x.v.Sign() == 0 || !y.irr && y.v.Sign() == 0) {
			x = num{v: new(big.Rat), float: x.float || y.float}
			continue
		}
		if mul {
			x = combine(new(big.Rat).Mul(x.v, y.v), x, y)
			continue
		}
		if y.v.Sign() == 0 && !y.irr {
			return p.fail(undecided)
		}
		q := combine(new(big.Rat).Quo(x.v, y.v), x, y)
		// latex2sympy makes "a/b" of two integer literals a Rational, a bare number.
		q.atomic = p.latex && x.atomic && y.atomic && !x.float && !y.float && x.v.IsInt() && y.v.IsInt()
		x = q
	}
	return num{}, false
}

// combine is the result of an operation: a float if either operand is, irrational if one operand
// is (two irrational operands are refused by the caller), never a bare number.
func combine(v *big.Rat, x, y num) num {
	r := num{v: v, float: x.float || y.float, irr: x.irr || y.irr}
	if r.float && !r.irr {
		r.v = roundToFloat64(v)
	}
	return r
}

// twoIrrational: sympy may simplify √2·√2 to 2; not decided here.
func twoIrrational(x, y num) bool { return x.irr && y.irr }

func roundToFloat64(v *big.Rat) *big.Rat {
	f, _ := v.Float64()
	r := new(big.Rat)
	if r.SetFloat64(f) == nil {
		return v
	}
	return r
}

func (p *arith) unary() (num, bool) {
	switch {
	case p.eat("-"):
		x, ok := p.unary()
		if !ok {
			return num{}, false
		}
		return num{v: new(big.Rat).Neg(x.v), float: x.float, atomic: x.atomic, irr: x.irr}, true
	case p.eat("+"):
		return p.unary()
	}
	return p.postfix()
}

func (p *arith) postfix() (num, bool) {
	x, ok := p.atom()
	if !ok {
		return x, false
	}
	if p.eat("^") {
		if p.eat(`\circ`) || p.eat(`{\circ}`) {
			return x, true // latex2sympy drops the degree sign
		}
		var e num
		if e, ok = p.atom(); !ok {
			return num{}, false
		}
		if e.float || e.irr || x.irr || !e.v.IsInt() || e.v.Num().CmpAbs(big.NewInt(64)) > 0 || x.float {
			return p.fail(undecided)
		}
		n := int(e.v.Num().Int64())
		if n < 0 && x.v.Sign() == 0 {
			return p.fail(undecided)
		}
		r := big.NewRat(1, 1)
		for range max(n, -n) {
			r.Mul(r, x.v)
			if r.Num().BitLen()+r.Denom().BitLen() > maxBits {
				return p.fail(undecided) // towers of powers: beyond any answer, and memory
			}
		}
		if n < 0 {
			r.Inv(r)
		}
		x = num{v: r}
	} else if !p.latex && p.eat("**") {
		return p.fail(undecided)
	}
	if p.latex && (p.eat(`\%`) || p.eat("%")) {
		x = num{v: new(big.Rat).Mul(x.v, big.NewRat(1, 100)), float: x.float, atomic: x.atomic, irr: x.irr}
	}
	return x, true
}

// maxBits bounds an exact value's size.
const maxBits = 1 << 14

// irrPrec is the precision irrational values are held to: far beyond the 6 decimals and the
// 53-bit floats they are compared with.
const irrPrec = 256

var piFloat, _ = new(big.Float).SetPrec(irrPrec).SetString("3.14159265358979323846264338327950288419716939937510582097494459230781640628620899862803482534211706798214808651328230664709384460955058223172535940812848111745028410270193852110555964462294895493038196")

var numberRE = regexp.MustCompile(`^(?:\d+(?:\.\d+)?|\.\d+)`)

func (p *arith) atom() (num, bool) {
	p.space()
	if p.i >= len(p.s) {
		return p.fail(undecided)
	}
	if m := numberRE.FindString(p.s[p.i:]); m != "" {
		p.i += len(m)
		if p.i < len(p.s) && (p.s[p.i] == '.' || p.s[p.i] == ',') {
			return p.fail(undecided) // "3." and stray commas: latex2sympy's own reading
		}
		v, ok := numberLiteral(m)
		if !ok {
			return p.fail(undecided)
		}
		x := v.nums[0]
		p.space()
		if p.latex && (p.peek(`\sqrt`) || p.peek(`\pi`)) {
			// a coefficient: 2\sqrt{2}, 2\pi
			y, ok := p.atom()
			if !ok {
				return num{}, false
			}
			return combine(new(big.Rat).Mul(x.v, y.v), x, y), true
		}
		if p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '(' || p.s[p.i] == '{' || p.s[p.i] == '\\' && !p.operatorNext()) {
			return p.fail(undecided) // juxtaposition: an implicit product latex2sympy reads its own way
		}
		return x, true
	}
	switch {
	case p.eat("("):
		return p.closed(")")
	case p.latex && p.eat("{"):
		return p.closed("}")
	case p.latex && p.eat(`\frac`):
		if !p.eat("{") {
			return p.fail(undecided)
		}
		a, ok := p.closed("}")
		if !ok || !p.eat("{") {
			return p.fail(undecided)
		}
		b, ok := p.closed("}")
		if !ok {
			return num{}, false
		}
		if b.v.Sign() == 0 && !b.irr || twoIrrational(a, b) {
			return p.fail(undecided)
		}
		q := combine(new(big.Rat).Quo(a.v, b.v), a, b)
		q.atomic = a.atomic && b.atomic && !a.float && !b.float && a.v.IsInt() && b.v.IsInt()
		return q, true
	case p.latex && p.eat(`\sqrt`):
		if !p.eat("{") {
			return p.fail(undecided)
		}
		a, ok := p.closed("}")
		if !ok {
			return num{}, false
		}
		if a.float || a.irr || a.v.Sign() < 0 {
			return p.fail(undecided)
		}
		if r, exact := ratSqrt(a.v); exact {
			return num{v: r}, true
		}
		f := new(big.Float).SetPrec(irrPrec).SetRat(a.v)
		r, _ := new(big.Float).SetPrec(irrPrec).Sqrt(f).Rat(nil)
		return num{v: r, irr: true}, true
	case p.latex && p.eat(`\pi`):
		pi, _ := piFloat.Rat(nil)
		return num{v: pi, irr: true}, true
	}
	return p.fail(undecided)
}

// peek says whether the command cmd is next (and not the start of a longer one).
func (p *arith) peek(cmd string) bool {
	rest := p.s[p.i:]
	return strings.HasPrefix(rest, cmd) && (len(rest) == len(cmd) || !isLetter(rest[len(cmd)]))
}

// operatorNext says whether the command at p.i is a binary operator or a percent sign.
func (p *arith) operatorNext() bool {
	for _, op := range []string{`\cdot`, `\times`, `\div`, `\%`} {
		if strings.HasPrefix(p.s[p.i:], op) {
			return true
		}
	}
	return false
}

func (p *arith) closed(end string) (num, bool) {
	x, ok := p.expr()
	if !ok {
		return num{}, false
	}
	if !p.eat(end) {
		return p.fail(undecided)
	}
	return x, true
}

// ratSqrt is √r when r is the square of a rational.
func ratSqrt(r *big.Rat) (*big.Rat, bool) {
	if r.Sign() < 0 {
		return nil, false
	}
	n, d := new(big.Int).Sqrt(r.Num()), new(big.Int).Sqrt(r.Denom())
	if new(big.Int).Mul(n, n).Cmp(r.Num()) != 0 || new(big.Int).Mul(d, d).Cmp(r.Denom()) != 0 {
		return nil, false
	}
	return new(big.Rat).SetFrac(n, d), true
}
