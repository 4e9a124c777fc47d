package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"unicode"

	"github.com/posttrain/posttrain/internal/pyfmt"
)

// Calculator is the built-in `calculator` tool: it evaluates an arithmetic expression as Python's
// eval would (integers exact at any size, / true division into a float, // and % floored, **
// powers, parentheses, unary signs) and returns str() of the result, as a Python tool
// `def calculator(expression: str) -> str: return str(eval(expression))` restricted to arithmetic.
type Calculator struct{}

// Name is "calculator".
func (Calculator) Name() string { return "calculator" }

// Schema is the function schema transformers' get_json_schema gives the Python tool above with
// its docstring.
func (Calculator) Schema() json.RawMessage {
	return json.RawMessage(`{"type": "function", "function": {"name": "calculator", "description": "Evaluates an arithmetic expression and returns its value.", "parameters": {"type": "object", "properties": {"expression": {"type": "string", "description": "The expression, e.g. \"1234 * 5678\" (+, -, *, /, //, %, ** and parentheses)."}}, "required": ["expression"]}}}`)
}

// Call evaluates arguments["expression"].
func (Calculator) Call(args map[string]any) (string, error) {
	expr, ok := args["expression"].(string)
	if !ok {
		for k := range args {
			if k != "expression" {
				return "", fmt.Errorf("calculator() got an unexpected keyword argument '%s'", k)
			}
		}
		if _, present := args["expression"]; !present {
			return "", errors.New("calculator() missing 1 required positional argument: 'expression'")
		}
		return "", errors.New("expression must be a string")
	}
	p := &calc{src: []rune(expr)}
	v, err := p.expr()
	if err == nil {
		p.space()
		if p.i < len(p.src) {
			err = fmt.Errorf("invalid syntax at %q", string(p.src[p.i:]))
		}
	}
	if err != nil {
		return "", err
	}
	return v.String(), nil
}

// number is a Python int (exact) or float.
type number struct {
	i     *big.Int // nil for a float
	f     float64
	float bool
}

func (n number) toFloat() float64 {
	if n.float {
		return n.f
	}
	f, _ := new(big.Float).SetInt(n.i).Float64()
	return f
}

// String is Python's str() of the number.
func (n number) String() string {
	if !n.float {
		return n.i.String()
	}
	return pyfmt.Repr(n.f)
}

// maxIntBits bounds an integer result (Python has no bound; a tool call must end).
const maxIntBits = 1 << 16

type calc struct {
	src []rune
	i   int
}

func (p *calc) space() {
	for p.i < len(p.src) && unicode.IsSpace(p.src[p.i]) {
		p.i++
	}
}

func (p *calc) peek(s string) bool {
	p.space()
	return strings.HasPrefix(string(p.src[p.i:min(len(p.src), p.i+len(s))]), s)
}

// expr := term (('+'|'-') term)*
func (p *calc) expr() (number, error) {
	a, err := p.term()
	for err == nil {
		switch {
		case p.peek("+"):
			p.i++
			var b number
			if b, err = p.term(); err == nil {
				a, err = arith('+', a, b)
			}
		case p.peek("-"):
			p.i++
			var b number
			if b, err = p.term(); err == nil {
				a, err = arith('-', a, b)
			}
		default:
			return a, nil
		}
	}
	return a, err
}

// term := unary (('*'|'/'|'//'|'%') unary)*
func (p *calc) term() (number, error) {
	a, err := p.unary()
	for err == nil {
		var op rune
		switch {
		case p.peek("**"):
			return a, nil
		case p.peek("//"):
			p.i += 2
			op = 'f'
		case p.peek("*"):
			p.i++
			op = '*'
		case p.peek("/"):
			p.i++
			op = '/'
		case p.peek("%"):
			p.i++
			op = '%'
		default:
			return a, nil
		}
		var b number
		if b, err = p.unary(); err == nil {
			a, err = arith(op, a, b)
		}
	}
	return a, err
}

// unary := ('+'|'-') unary | power
func (p *calc) unary() (number, error) {
	switch {
	case p.peek("-"):
		p.i++
		v, err := p.unary()
		if err != nil {
			return v, err
		}
		return arith('-', number{i: big.NewInt(0)}, v)
	case p.peek("+"):
		p.i++
		return p.unary()
	}
	return p.power()
}

// power := atom ('**' unary)?   (right-associative, binding tighter than a unary sign on its left)
func (p *calc) power() (number, error) {
	a, err := p.atom()
	if err != nil || !p.peek("**") {
		return a, err
	}
	p.i += 2
	b, err := p.unary()
	if err != nil {
		return a, err
	}
	return arith('^', a, b)
}

// atom := number | '(' expr ')'
func (p *calc) atom() (number, error) {
	p.space()
	if p.peek("(") {
		p.i++
		v, err := p.expr()
		if err != nil {
			return v, err
		}
		if !p.peek(")") {
			return v, errors.New("'(' was never closed")
		}
		p.i++
		return v, nil
	}
	start := p.i
	for p.i < len(p.src) && (unicode.IsDigit(p.src[p.i]) || p.src[p.i] == '.' || p.src[p.i] == '_') {
		p.i++
	}
	if p.i < len(p.src) && (p.src[p.i] == 'e' || p.src[p.i] == 'E') && p.i > start {
		p.i++
		if p.i < len(p.src) && (p.src[p.i] == '+' || p.src[p.i] == '-') {
			p.i++
		}
		for p.i < len(p.src) && unicode.IsDigit(p.src[p.i]) {
			p.i++
		}
	}
	tok := strings.ReplaceAll(string(p.src[start:p.i]), "_", "")
	if tok == "" {
		if p.i < len(p.src) {
			return number{}, fmt.Errorf("invalid syntax at %q", string(p.src[p.i:]))
		}
		return number{}, errors.New("invalid syntax: the expression ends early")
	}
	if !strings.ContainsAny(tok, ".eE") {
		n, ok := new(big.Int).SetString(tok, 10)
		if !ok {
			return number{}, fmt.Errorf("invalid number %q", tok)
		}
		return number{i: n}, nil
	}
	var f float64
	if _, err := fmt.Sscan(tok, &f); err != nil {
		return number{}, fmt.Errorf("invalid number %q", tok)
	}
	return number{f: f, float: true}, nil
}

// arith applies op (+ - * / f=// % ^=**) with Python's int/float rules.
func arith(op rune, a, b number) (number, error) {
	if !a.float && !b.float && op != '/' {
		x, y := a.i, b.i
		r := new(big.Int)
		switch op {
		case '+':
			r.Add(x, y)
		case '-':
			r.Sub(x, y)
		case '*':
			r.Mul(x, y)
		case 'f', '%':
			if y.Sign() == 0 {
				return number{}, errors.New("integer division or modulo by zero")
			}
			q, m := new(big.Int).DivMod(x, y, new(big.Int)) // Euclidean: m ≥ 0
			if m.Sign() != 0 && y.Sign() < 0 {              // floored: the remainder takes y's sign
				q.Sub(q, big.NewInt(1))
				m.Add(m, y)
			}
			if op == 'f' {
				r = q
			} else {
				r = m
			}
		case '^':
			if y.Sign() < 0 {
				return arith('^', number{f: a.toFloat(), float: true}, number{f: b.toFloat(), float: true})
			}
			if !y.IsInt64() || int64(x.BitLen())*y.Int64() > maxIntBits {
				return number{}, errors.New("the result is too large")
			}
			r.Exp(x, y, nil)
		}
		if r.BitLen() > maxIntBits {
			return number{}, errors.New("the result is too large")
		}
		return number{i: r}, nil
	}
	x, y := a.toFloat(), b.toFloat()
	var r float64
	switch op {
	case '+':
		r = x + y
	case '-':
		r = x - y
	case '*':
		r = x * y
	case '/', 'f', '%':
		if y == 0 {
			if op == '/' {
				return number{}, errors.New("division by zero")
			}
			return number{}, errors.New("float floor division by zero")
		}
		switch op {
		case '/':
			r = x / y
		case 'f':
			r = math.Floor(x / y)
		default:
			r = math.Mod(x, y)
			if r != 0 && (r < 0) != (y < 0) {
				r += y
			}
		}
	case '^':
		if x == 0 && y < 0 {
			return number{}, errors.New("0.0 cannot be raised to a negative power")
		}
		r = math.Pow(x, y)
	}
	if math.IsInf(r, 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
		return number{}, errors.New("(34, 'Numerical result out of range')")
	}
	return number{f: r, float: true}, nil
}
