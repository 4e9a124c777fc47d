package chat

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/parser"
)

// The Jinja environment transformers builds for chat templates (chat_template_utils.py,
// _compile_jinja_template): trim_blocks and lstrip_blocks on, a tojson that does not escape HTML
// and keeps Python's json.dumps formatting, and the raise_exception / strftime_now globals.

// newConfig returns the lexer settings of transformers' ImmutableSandboxedEnvironment.
func newConfig() *config.Config {
	c := config.New()
	c.TrimBlocks = true
	c.LeftStripBlocks = true
	return c
}

// newEnvironment returns gonja's builtins with the chat-template overrides. A fresh copy per
// Template, so nothing global is mutated.
func newEnvironment() *exec.Environment {
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	_ = filters.Replace("tojson", filterToJSON)
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("strftime_now", strftimeNow)
	ctx.Set("range", rangeFunction)
	tests := exec.NewTestSet(map[string]exec.TestFunction{}).Update(builtins.Tests)
	_ = tests.Replace("sequence", testSequence)
	methods := builtins.Methods
	methods.Dict = orderedDictMethods(builtins.Methods.Dict)
	methods.Str = pyStripMethods(builtins.Methods.Str)
	controls := exec.NewControlStructureSet(map[string]parser.ControlStructureParser{
		"generation": generationParser}).Update(builtins.ControlStructures)
	_ = controls.Replace("macro", macroParser)
	return &exec.Environment{
		Context:           ctx,
		Filters:           filters,
		Tests:             tests,
		ControlStructures: controls,
		Methods:           methods,
	}
}

// testSequence is Jinja's `is sequence`: anything with len() and [] (strings, lists, dicts).
func testSequence(_ *exec.Context, in *exec.Value, _ *exec.VarArgs) (bool, error) {
	return in.IsList() || in.IsDict() || in.IsString(), nil
}

// TemplateError is what a template's raise_exception(msg) produced.
type TemplateError struct{ Msg string }

func (e *TemplateError) Error() string { return "chat template raised: " + e.Msg }

// strftimeNow is transformers' strftime_now: the current local time in a Python strftime format.
func strftimeNow(format string) string { return strftime(time.Now(), format) }

// strftime formats t with the C/Python strftime codes chat templates use; an unknown code is
// kept as written.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 == len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch c := format[i]; c {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'b', 'h':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(c)
		}
	}
	return b.String()
}

// filterToJSON is transformers' tojson:
// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
func filterToJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	o, err := jsonKwargs(params)
	if err != nil {
		return exec.AsValue(fmt.Errorf("tojson: %w", err))
	}
	var b strings.Builder
	if err := writePyJSON(&b, in, o, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(b.String())
}

func jsonKwargs(params *exec.VarArgs) (jsonOptions, error) {
	get := func(name string, pos int) *exec.Value {
		if v, ok := params.KwArgs[name]; ok {
			return v
		}
		if pos < len(params.Args) {
			return params.Args[pos]
		}
		return nil
	}
	indent := get("indent", 1)
	o := pyJSONDefaults(indent != nil && !indent.IsNil())
	switch {
	case indent == nil || indent.IsNil():
	case indent.IsInteger():
		o.indent = strings.Repeat(" ", max(indent.Integer(), 0))
	case indent.IsString():
		o.indent = indent.String()
	default:
		return o, fmt.Errorf("indent must be an int or a string, got %s", indent.String())
	}
	if v := get("ensure_ascii", 0); v != nil {
		o.ensureASCII = v.IsTrue()
	}
	if v := get("sort_keys", 3); v != nil {
		o.sortKeys = v.IsTrue()
	}
	if v := get("separators", 2); v != nil && !v.IsNil() {
		if !v.IsList() || v.Len() != 2 {
			return o, errors.New("separators must be a pair of strings")
		}
		o.itemSep, o.keySep = v.Index(0).String(), v.Index(1).String()
	}
	return o, nil
}

// orderedDictMethods keeps gonja's dict methods but makes keys/values/items follow the insertion
// order of ordered dicts (exec.Dict), as Python's do.
func orderedDictMethods(base *exec.MethodSet[map[string]any]) *exec.MethodSet[map[string]any] {
	m := map[string]exec.Method[map[string]any]{}
	for _, name := range []string{"get", "pop", "setdefault", "update", "copy", "clear", "keys", "values", "items"} {
		if fn, ok := base.Get(name); ok {
			m[name] = fn
		}
	}
	ordered := func(name string, pick func(k, v *exec.Value) any) {
		fallback := m[name]
		m[name] = func(self map[string]any, selfValue *exec.Value, args *exec.VarArgs) (any, error) {
			d, ok := asDict(selfValue)
			if !ok || len(args.Args)+len(args.KwArgs) > 0 {
				return fallback(self, selfValue, args)
			}
			out := make([]any, 0, len(d.Pairs))
			for _, p := range d.Pairs {
				out = append(out, pick(p.Key, p.Value))
			}
			return out, nil
		}
	}
	ordered("keys", func(k, _ *exec.Value) any { return k.Interface() })
	ordered("values", func(_, v *exec.Value) any { return v.Interface() })
	ordered("items", func(k, v *exec.Value) any { return []any{k.Interface(), v.Interface()} })
	return exec.NewMethodSet(m)
}

func asDict(v *exec.Value) (exec.Dict, bool) {
	switch d := v.Interface().(type) {
	case exec.Dict:
		return d, true
	case *exec.Dict:
		return *d, true
	}
	return exec.Dict{}, false
}

// strMethodNames are gonja's string methods (builtins/methods/str.go), kept as they are except
// strip/lstrip/rstrip/split/rsplit, whose argument-less forms gonja gets wrong (it rejects the
// call); Python strips and splits on all whitespace.
var strMethodNames = strings.Fields(`capitalize capwords casefold center count encode endswith
	expandtabs find format format_map isalnum isalpha isascii isdecimal isdigit islower isnumeric
	isprintable isspace istitle isupper join ljust lower lstrip partition removeprefix removesuffix
	replace rfind rjust rpartition rsplit rstrip split splitlines startswith strip swapcase title
	upper zfill`)

func pyStripMethods(base *exec.MethodSet[string]) *exec.MethodSet[string] {
	m := map[string]exec.Method[string]{}
	for _, name := range strMethodNames {
		if fn, ok := base.Get(name); ok {
			m[name] = fn
		}
	}
	strip := func(name string, left, right bool) {
		m[name] = func(self string, _ *exec.Value, args *exec.VarArgs) (any, error) {
			if len(args.KwArgs) > 0 || len(args.Args) > 1 {
				return nil, exec.ErrInvalidCall(fmt.Errorf("%s() takes at most 1 argument", name))
			}
			cut := isPySpace
			if len(args.Args) == 1 && !args.Args[0].IsNil() {
				if !args.Args[0].IsString() {
					return nil, exec.ErrInvalidCall(fmt.Errorf("%s arg must be None or str", name))
				}
				chars := args.Args[0].String()
				cut = func(r rune) bool { return strings.ContainsRune(chars, r) }
			}
			if left {
				self = strings.TrimLeftFunc(self, cut)
			}
			if right {
				self = strings.TrimRightFunc(self, cut)
			}
			return self, nil
		}
	}
	strip("strip", true, true)
	strip("lstrip", true, false)
	strip("rstrip", false, true)
	m["split"] = splitMethod(false)
	m["rsplit"] = splitMethod(true)
	m["replace"] = replaceMethod
	return exec.NewMethodSet(m)
}

// isPySpace is Python's str.isspace for one character.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}
