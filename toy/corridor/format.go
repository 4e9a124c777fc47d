package corridor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/posttrain/posttrain/internal/pyfmt"
)

// stateDict is the repr of the course's {s: value for s in NONTERMINAL} with each value passed
// through f: "{1: 0.0437, 2: 0.5456, 3: 0.8473}".
func stateDict(f func(s int) string) string {
	parts := make([]string, len(NonTerminal))
	for i, s := range NonTerminal {
		parts[i] = fmt.Sprintf("%d: %s", s, f(s))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// roundedStates is repr({s: round(v[s], n) for s in NONTERMINAL}).
func roundedStates(v *StateValues, n int) string {
	return stateDict(func(s int) string { return pyfmt.RoundRepr(v[s], n) })
}

// padRight is Python's f'{s:5s}': s left-aligned in width code points.
func padRight(s string, width int) string {
	if n := utf8.RuneCountInString(s); n < width {
		return s + strings.Repeat(" ", width-n)
	}
	return s
}

// Float is a float64 that marshals to JSON as Python's json.dumps does (repr: 1.0, 0.1, 1e-05).
type Float float64

// MarshalJSON writes repr(x); NaN and infinities are an error (they are not JSON).
func (x Float) MarshalJSON() ([]byte, error) {
	f := float64(x)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("corridor: %v is not representable in JSON", f)
	}
	return []byte(pyfmt.Repr(f)), nil
}

func floats(xs []float64) []Float {
	out := make([]Float, len(xs))
	for i, x := range xs {
		out[i] = Float(x)
	}
	return out
}

// Field is one key of an Object.
type Field struct {
	Key   string
	Value any
}

// Object is a JSON object that keeps its keys in order (like a Python dict).
type Object []Field

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) { return pyfmt.MarshalItems(o) }

// stateObject is {"1": v[1], "2": v[2], "3": v[3]}.
func stateObject(v *StateValues) Object {
	o := make(Object, 0, len(NonTerminal))
	for _, s := range NonTerminal {
		o = append(o, Field{strconv.Itoa(s), Float(v[s])})
	}
	return o
}

// Result is what every phase returns: the lines it prints and its JSON results.
type Result interface {
	Lines() []string
	Results() Object
}
