package extreward

import (
	"fmt"
	"math"
	"math/big"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// accuracyReward is trl.rewards.accuracy_reward (TRL 0.24.0, math_verify 0.8.0) for answers whose
// value is a number, a fraction, a percentage or a finite set of them:
//
//	gold   = parse(solution)                     # LaTeX and plain expressions, first match
//	answer = parse(completion, boxed first, LaTeX only, no match without an anchor)
//	reward = verify(gold, answer)  if gold was found, else  completion.lower() == solution.lower()
//
// Extraction follows math_verify's regexes and priorities (parser.py: a \boxed{} or a "final answer
// is … I hope" first, then "final answer … is", "answer:", "answer", and for the solution plain
// LaTeX and numbers; among one priority's matches the one ending last; only that one is parsed),
// normalisation follows latex2sympy2_extended's normalize_latex (boxed contents, \left/\right,
// \dfrac, dollars, trailing units), and comparison follows verify's rules for numbers
// (grader.py): equal values, or, when one side is a bare float, equal after rounding both to 6
// decimals, where a rounded integer never equals a rounded float (sympy ≥ 1.13: 10 ≠ 10.0000001).
//
// What it cannot decide as math_verify would — symbols, intervals, matrices, functions, equations
// of different symbols, floats within a unit in the last place (sympy's cancellation), texts
// latex2sympy reads its own way — it does not score: the reward is NaN (TRL's None), the sample
// adds nothing to the total, and rewards/accuracy_reward/mean leaves it out (the trainer logs the
// fraction as rewards/accuracy_reward/undecided). TRL's own function runs through the worker as
// `--reward-funcs trl.rewards.accuracy_reward`. TestAccuracyReward_AsTRL holds both to TRL's
// rewards on one table (testdata/accuracy_reward.json).
func accuracyReward(c Call) ([]float64, error) {
	sols, ok := c.Columns["solution"]
	if !ok {
		return nil, fmt.Errorf("accuracy_reward compares against the dataset's solution column, and the dataset has none")
	}
	texts, golds := make([]string, len(c.Completions)), make([]*goldAnswer, len(c.Completions))
	parsed := map[string]*goldAnswer{} // a group's completions share their solution: parsed once
	for i, comp := range c.Completions {
		text, err := content(comp)
		if err != nil {
			return nil, err
		}
		sol, ok := sols[i].(string)
		if !ok {
			return nil, fmt.Errorf("accuracy_reward: solution %d is a %T, not a string", i, sols[i])
		}
		if parsed[sol] == nil {
			parsed[sol] = parseGold(sol)
		}
		texts[i], golds[i] = text, parsed[sol]
	}
	// A few milliseconds a long completion: the completions are checked on every core.
	out := make([]float64, len(texts))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(texts)) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(texts); i = int(next.Add(1) - 1) {
				out[i] = golds[i].score(texts[i])
			}
		})
	}
	wg.Wait()
	return out, nil
}

// MathAccuracy is accuracy_reward for one solution and completion text: 1, 0, or NaN where the
// answer lies outside what is decided here.
func MathAccuracy(solution, completion string) float64 {
	return parseGold(solution).score(completion)
}

// goldAnswer is a solution as accuracy_reward reads it: the answer found in it (if found).
type goldAnswer struct {
	solution string
	gold     extracted
	found    bool
}

func parseGold(solution string) *goldAnswer {
	gold, found := extract(solution, goldPatterns(), goldNorm)
	// nothing found, or nothing but an empty string: the texts are compared
	return &goldAnswer{solution: solution, gold: gold, found: found && !(gold.failed && gold.str == "")}
}

// score is the reward of one completion against the solution.
func (g *goldAnswer) score(completion string) float64 {
	if !g.found {
		if strings.EqualFold(strings.TrimSpace(completion), strings.TrimSpace(g.solution)) {
			return 1
		}
		return 0
	}
	gold := g.gold
	ans, found := extract(completion, answerPatterns(), answerNorm)
	if !found {
		return 0 // verify(gold, []) is False
	}
	// verify: any pair of (parsed value, fallback string) on each side: values with values,
	// strings with strings.
	if gold.str != "" && ans.str != "" && gold.str == ans.str {
		return 1
	}
	if gold.failed || ans.failed {
		return 0 // a string against a value is False
	}
	if gold.undecided || ans.undecided {
		return math.NaN()
	}
	if gold.val.eq && ans.val.eq {
		// Two equations: assignments of the same symbol compare their values; others need
		// sympy's algebra.
		if gold.val.assign && ans.val.assign && gold.val.lhs == ans.val.lhs && !gold.val.set && !ans.val.set {
			return triReward(unroundedEqual(gold.val.nums[0], ans.val.nums[0]))
		}
		return math.NaN()
	}
	if gold.val.eq && !gold.val.assign {
		return math.NaN() // a gold equation that is no assignment, against a value
	}
	return triReward(valuesEqual(gold.val, ans.val))
}

func triReward(t tri) float64 {
	switch t {
	case yes:
		return 1
	case no:
		return 0
	}
	return math.NaN()
}

// extracted is one side of the comparison: the parsed value of the first match, the match's text
// (math_verify's fallback string), or that its value lies outside this subset (undecided) or that
// latex2sympy itself would fail on it (failed).
type extracted struct {
	val       value
	str       string
	undecided bool
	failed    bool
}

// normConfig is the part of a NormalizationConfig that differs between the two sides.
type normConfig struct {
	nits, malformed bool
}

var (
	goldNorm   = normConfig{nits: true, malformed: true} // LatexExtractionConfig()'s default
	answerNorm = normConfig{}                            // accuracy_reward's nits=False, malformed_operators=False
)

// pattern is one of math_verify's regexes with its priority; latex says whether its groups are
// LaTeX environments (else plain numbers and expressions).
type pattern struct {
	re       *regexp.Regexp
	priority int
	latex    bool
	// notBeforeEq: no match directly followed by "=" (math_verify's (?!\s*=)).
	notBeforeEq bool
}

// extract is math_verify's parse(…, extraction_mode="first_match", fallback_mode="first_match"):
// the lowest priority with a match, its match ending last (leftmost among those), parsed. found is
// false when nothing matched.
func extract(s string, pats []pattern, cfg normConfig) (extracted, bool) {
	for i := 0; i < len(pats); {
		j := i
		for j < len(pats) && pats[j].priority == pats[i].priority {
			j++
		}
		type match struct {
			loc []int
			p   pattern
		}
		var ms []match
		for _, p := range pats[i:j] {
			for _, loc := range p.re.FindAllStringSubmatchIndex(s, -1) {
				if p.latex && acceptLatex(s, p.re, loc) || !p.latex && (!p.notBeforeEq || !beforeEq(s, loc[1])) {
					ms = append(ms, match{loc, p})
				}
			}
		}
		i = j
		if len(ms) == 0 {
			continue
		}
		sort.SliceStable(ms, func(a, b int) bool {
			if ms[a].loc[1] != ms[b].loc[1] {
				return ms[a].loc[1] > ms[b].loc[1]
			}
			return ms[a].loc[0] < ms[b].loc[0]
		})
		m := ms[0]
		if m.p.latex {
			return extractLatex(s, m.p.re, m.loc, cfg), true
		}
		return extractExpr(s, m.p.re, m.loc), true
	}
	return extracted{}, false
}

// group returns the first non-empty submatch whose name starts with prefix.
func group(s string, re *regexp.Regexp, loc []int, prefix string) (string, bool) {
	for k, name := range re.SubexpNames() {
		if k > 0 && strings.HasPrefix(name, prefix) && loc[2*k] >= 0 && loc[2*k+1] > loc[2*k] {
			return s[loc[2*k]:loc[2*k+1]], true
		}
	}
	return "", false
}

// beforeEq is math_verify's (?!\s*=) after an "answer … X" expression, which RE2 lacks: X is
// followed by "=".
func beforeEq(s string, end int) bool {
	return strings.HasPrefix(strings.TrimLeft(s[end:], " \t\n\r\f\v"), "=")
}

// extractExpr is math_verify's extract_expr: a number (thousands separators and leading zeros
// dropped, a decimal comma read as a point, a percent sign as ×1/100) or an expression of digits
// and operators.
func extractExpr(s string, re *regexp.Regexp, loc []int) extracted {
	integer, _ := group(s, re, loc, "integer")
	decimal, _ := group(s, re, loc, "decimal")
	_, pct := group(s, re, loc, "percent")
	if integer != "" || decimal != "" {
		integer = strings.TrimLeft(strings.NewReplacer(",", "", " ", "").Replace(integer), "0")
		neg := strings.HasPrefix(integer, "-")
		if neg {
			integer = strings.TrimLeft(integer[1:], "0")
		}
		if integer == "" {
			integer = "0"
		}
		if neg {
			integer = "-" + integer
		}
		str := integer + strings.Replace(decimal, ",", ".", 1)
		v, ok := numberLiteral(str)
		if !ok {
			return extracted{str: str, undecided: true}
		}
		if pct {
			v = percent(v)
		}
		return extracted{val: v, str: str}
	}
	expr, _ := group(s, re, loc, "expr")
	if expr == "" {
		return extracted{failed: true}
	}
	v, st := parsePlainExpr(strings.ReplaceAll(expr, "\n", " "))
	switch st {
	case yes:
		return extracted{val: v, str: expr}
	case no:
		return extracted{str: expr, failed: true}
	}
	return extracted{str: expr, undecided: true}
}

// extractLatex is math_verify's extract_latex: each LaTeX environment of the match normalised and
// parsed; several, all parsed, make a finite set.
func extractLatex(s string, re *regexp.Regexp, loc []int, cfg normConfig) extracted {
	var vals []value
	var strs []string
	var sts []tri
	for _, prefix := range []string{"first", "next1", "next2", "next3", "next4", "next5"} {
		var latex, kind string
		pct := false
		for k, name := range re.SubexpNames() {
			if k == 0 || !strings.HasPrefix(name, prefix+"_") || loc[2*k] < 0 {
				continue
			}
			switch n := strings.TrimPrefix(name, prefix+"_"); {
			case n == "percent":
				pct = loc[2*k+1] > loc[2*k]
			case latex == "" && loc[2*k+1] > loc[2*k]:
				latex, kind = s[loc[2*k]:loc[2*k+1]], n
			}
		}
		if latex == "" {
			continue
		}
		norm := normalizeLatex(latex, kind == "latexBoxed", cfg)
		v, st := parseLatex(norm)
		if st == yes && pct {
			v = percent(v)
		}
		vals, strs, sts = append(vals, v), append(strs, norm), append(sts, st)
	}
	if len(strs) == 0 {
		return extracted{failed: true}
	}
	one := func(i int) extracted {
		return extracted{val: vals[i], str: strs[i], undecided: sts[i] == undecided, failed: sts[i] == no}
	}
	if len(strs) == 1 {
		return one(0)
	}
	set := value{set: true}
	for i, st := range sts {
		switch st {
		case undecided:
			// Whether latex2sympy parses it decides between a set and the first alone.
			return extracted{str: strs[0], undecided: true}
		case no:
			return one(0) // not all parsed: the first alone, as math_verify does
		}
		set.nums = append(set.nums, vals[i].nums...)
	}
	return extracted{val: set, str: strings.Join(strs, " and ")}
}

// ---- values and their comparison (grader.py) ----

// num is a real number as sympy would hold it after doit(): exact, or a binary float (float: some
// operand was a Float), and whether it is a bare Number (or a percentage of one) — atomic, the
// case in which verify rounds floats.
type num struct {
	v      *big.Rat
	float  bool
	atomic bool
	irr    bool // irrational (a square root, π): v holds it to irrPrec bits
}

// value is a number, or a finite set of numbers (several boxed answers, "3, 7"), or an equation
// (eq) held as its last right-hand side, which is what verify compares when the other side is no
// equation; assign: its left-hand side is only symbols ("x = 5").
type value struct {
	nums       []num
	set        bool
	eq, assign bool
	lhs        string // an assignment's symbol
}

type tri int

const (
	undecided tri = iota
	yes
	no
)

func boolTri(b bool) tri {
	if b {
		return yes
	}
	return no
}

// valuesEqual is verify's sympy_expr_eq on numbers and finite sets.
func valuesEqual(gold, pred value) tri {
	if !gold.set && !pred.set {
		return numsEqual(gold.nums[0], pred.nums[0])
	}
	g, p := dedupe(gold.nums), dedupe(pred.nums)
	if len(g) != len(p) {
		// Unequal sizes; sympy's own set equality could still call 7 and 7.0 one element.
		for _, x := range g {
			for _, y := range p {
				if x.irr || y.irr || x.float != y.float && exactEqual(x, y) {
					return undecided
				}
			}
		}
		return no
	}
	sortNums(g)
	sortNums(p)
	out := yes
	for i := range g {
		switch numsEqual(g[i], p[i]) {
		case no:
			return no
		case undecided:
			out = undecided
		}
	}
	return out
}

// numsEqual: sympy_str_eq, sympy_numeric_eq and sympy_symbolic_eq on two numbers:
//   - equal values (a float against the other side rounded to a binary float) are equal;
//   - with a bare float on either side, both are rounded to 6 decimals (an Integer stays one);
//   - otherwise (a - b).evalf(15, chop=True) == 0: a compound of floats within a few units in the
//     last place of the other side may be chopped to 0 by sympy's cancellation, so it is not
//     decided here; irrational values are equal when they agree to far beyond 15 digits, and an
//     irrational value equals no rational one.
func numsEqual(a, b num) tri {
	if !a.irr && !b.irr && exactEqual(a, b) {
		return yes
	}
	if a.atomic && a.float || b.atomic && b.float {
		fa, _ := a.v.Float64()
		fb, _ := b.v.Float64()
		if (a.irr || b.irr) && fa == fb {
			return undecided // a float equal to an irrational value to the last bit
		}
		ra, ia := round6(a)
		rb, ib := round6(b)
		return boolTri(ia == ib && ra == rb)
	}
	return unroundedEqual(a, b)
}

// unroundedEqual is (a − b).evalf(15, chop=True) == 0 and simplify(a − b) == 0 without rounding:
// numsEqual past its bare-float case, and the right-hand sides of two assignments of one symbol
// ("x = 5" and "x = 5.0"), as sympy_compare_relational compares them.
func unroundedEqual(a, b num) tri {
	if !a.irr && !b.irr && exactEqual(a, b) {
		return yes
	}
	if a.float || b.float {
		if near(a.v, b.v, 1e-14) {
			return undecided
		}
		return no
	}
	if a.irr && b.irr && near(a.v, b.v, 1e-60) {
		return yes
	}
	return no
}

// near: |a − b| ≤ tol·max(1, |a|).
func near(a, b *big.Rat, tol float64) bool {
	d := new(big.Rat).Sub(a, b)
	d.Abs(d)
	scale := new(big.Rat).Abs(a)
	if scale.Cmp(big.NewRat(1, 1)) < 0 {
		scale.SetInt64(1)
	}
	t := new(big.Rat).SetFloat64(tol)
	return d.Cmp(t.Mul(t, scale)) <= 0
}

// exactEqual is simplify(a − b) == 0: with a float on either side, the other is rounded to a
// binary float first, as sympy's Float arithmetic does.
func exactEqual(a, b num) bool {
	if a.float || b.float {
		fa, _ := a.v.Float64()
		fb, _ := b.v.Float64()
		return fa == fb
	}
	return a.v.Cmp(b.v) == 0
}

// round6 is sympy's x.round(6): an Integer stays one (isInt), anything else becomes a Float of 6
// decimals (returned as its decimal text).
func round6(x num) (string, bool) {
	if !x.float && !x.irr && x.v.IsInt() {
		return x.v.String(), true
	}
	return x.v.FloatString(6), false
}

func dedupe(xs []num) []num {
	var out []num
	for _, x := range xs {
		dup := false
		for _, y := range out {
			if x.float == y.float && x.irr == y.irr && x.v.Cmp(y.v) == 0 {
				dup = true
			}
		}
		if !dup {
			out = append(out, x)
		}
	}
	return out
}

func sortNums(xs []num) { sort.Slice(xs, func(i, j int) bool { return xs[i].v.Cmp(xs[j].v) < 0 }) }

// percent is latex2sympy's X% = X·(1/100): still atomic when X is.
func percent(v value) value {
	out := value{set: v.set}
	for _, x := range v.nums {
		out.nums = append(out.nums, num{v: new(big.Rat).Mul(x.v, big.NewRat(1, 100)), float: x.float, atomic: x.atomic})
	}
	return out
}

// numberLiteral is sympy's Number(text): an Integer, or a Float (binary, 53 bits) with a point.
func numberLiteral(s string) (value, bool) {
	if strings.ContainsAny(s, ".") {
		var f big.Float
		if _, ok := f.SetString(s); !ok {
			return value{}, false
		}
		f64, _ := f.Float64()
		r := new(big.Rat)
		if r.SetFloat64(f64) == nil {
			return value{}, false
		}
		return value{nums: []num{{v: r, float: true, atomic: true}}}, true
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return value{}, false
	}
	return value{nums: []num{{v: r, atomic: true}}}, true
}
