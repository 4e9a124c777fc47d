package chat

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"

	"github.com/posttrain/posttrain/internal/pyfmt"
)

// jsonOptions are the keyword arguments of transformers' tojson filter:
// json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
type jsonOptions struct {
	ensureASCII bool
	indent      string // "" and !indented: compact form
	indented    bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

// pyJSONDefaults returns json.dumps' separators: (', ', ': '), or (',', ': ') with an indent.
func pyJSONDefaults(indented bool) jsonOptions {
	if indented {
		return jsonOptions{indented: true, itemSep: ",", keySep: ": "}
	}
	return jsonOptions{itemSep: ", ", keySep: ": "}
}

// PyJSON formats v exactly as Python's json.dumps(v, ensure_ascii=False) does for the values a
// chat template sees: ordered dicts keep their key order, floats print as repr(float).
func PyJSON(v any) (string, error) {
	var b strings.Builder
	err := writePyJSON(&b, v, pyJSONDefaults(false), 0)
	return b.String(), err
}

func writePyJSON(b *strings.Builder, v any, o jsonOptions, depth int) error {
	if depth > 200 {
		return fmt.Errorf("tojson: nesting deeper than 200 levels")
	}
	switch t := v.(type) {
	case nil:
		b.WriteString("null")
		return nil
	case *exec.Value:
		if t == nil {
			b.WriteString("null")
			return nil
		}
		if t.IsError() {
			return fmt.Errorf("tojson: %s", t.Error())
		}
		return writePyJSON(b, t.Interface(), o, depth)
	case exec.Dict:
		return writePyObject(b, dictPairs(t.Pairs), o, depth)
	case *exec.Dict:
		return writePyObject(b, dictPairs(t.Pairs), o, depth)
	case string:
		writePyString(b, t, o.ensureASCII)
		return nil
	case bool:
		b.WriteString(map[bool]string{true: "true", false: "false"}[t])
		return nil
	case float32:
		b.WriteString(pyFloatJSON(float64(t)))
		return nil
	case float64:
		b.WriteString(pyFloatJSON(t))
		return nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		b.WriteString(strconv.FormatInt(rv.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		b.WriteString(strconv.FormatUint(rv.Uint(), 10))
	case reflect.String:
		writePyString(b, rv.String(), o.ensureASCII)
	case reflect.Bool:
		return writePyJSON(b, rv.Bool(), o, depth)
	case reflect.Float32, reflect.Float64:
		b.WriteString(pyFloatJSON(rv.Float()))
	case reflect.Slice, reflect.Array:
		return writePyArray(b, rv, o, depth)
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return fmt.Errorf("tojson: map keys must be strings, got %s", rv.Type().Key())
		}
		// A Go map has no insertion order; sorted keys are the only deterministic choice.
		var kv []keyValue
		for _, k := range rv.MapKeys() {
			kv = append(kv, keyValue{k.String(), rv.MapIndex(k).Interface()})
		}
		sort.Slice(kv, func(i, j int) bool { return kv[i].key < kv[j].key })
		return writePyObject(b, kv, o, depth)
	case reflect.Pointer:
		if rv.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writePyJSON(b, rv.Elem().Interface(), o, depth)
	default:
		return fmt.Errorf("tojson: cannot serialize %T", v)
	}
	return nil
}

type keyValue struct {
	key   string
	value any
}

func dictPairs(pairs []*exec.Pair) []keyValue {
	kv := make([]keyValue, 0, len(pairs))
	for _, p := range pairs {
		kv = append(kv, keyValue{p.Key.String(), p.Value})
	}
	return kv
}

func newline(b *strings.Builder, o jsonOptions, depth int) {
	if o.indented {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(o.indent, depth))
	}
}

func writePyObject(b *strings.Builder, kv []keyValue, o jsonOptions, depth int) error {
	if len(kv) == 0 {
		b.WriteString("{}")
		return nil
	}
	if o.sortKeys {
		kv = append([]keyValue(nil), kv...)
		sort.SliceStable(kv, func(i, j int) bool { return kv[i].key < kv[j].key })
	}
	b.WriteByte('{')
	for i, e := range kv {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		newline(b, o, depth+1)
		writePyString(b, e.key, o.ensureASCII)
		b.WriteString(o.keySep)
		if err := writePyJSON(b, e.value, o, depth+1); err != nil {
			return err
		}
	}
	newline(b, o, depth)
	b.WriteByte('}')
	return nil
}

func writePyArray(b *strings.Builder, rv reflect.Value, o jsonOptions, depth int) error {
	if rv.Len() == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i := 0; i < rv.Len(); i++ {
		if i > 0 {
			b.WriteString(o.itemSep)
		}
		newline(b, o, depth+1)
		if err := writePyJSON(b, rv.Index(i).Interface(), o, depth+1); err != nil {
			return err
		}
	}
	newline(b, o, depth)
	b.WriteByte(']')
	return nil
}

// writePyString escapes s like json.encoder.py_encode_basestring(_ascii).
func writePyString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				fmt.Fprintf(b, `\u%04x`, c)
			} else if c >= utf8.RuneSelf && ensureASCII {
				r, size := utf8.DecodeRuneInString(s[i:])
				writeASCIIRune(b, r)
				i += size
				continue
			} else {
				b.WriteByte(c)
			}
		}
		i++
	}
	b.WriteByte('"')
}

func writeASCIIRune(b *strings.Builder, r rune) {
	if r > 0xFFFF { // UTF-16 surrogate pair, as Python writes it
		r -= 0x10000
		fmt.Fprintf(b, `\u%04x\u%04x`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		return
	}
	fmt.Fprintf(b, `\u%04x`, r)
}

// pyFloatJSON formats f as json.dumps does: Python's float.__repr__ for finite f, and json's
// NaN/Infinity spellings (repr's are nan/inf).
func pyFloatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return pyfmt.Repr(f)
}
