package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Template values mirror what Python's json.loads hands to Jinja: objects keep their key order
// (gonja's exec.Dict, ordered pairs), arrays are []any, integers are int, other numbers float64.
// Key order matters because `tojson` must print keys in insertion order as Python dicts do.

// decodeJSON parses one JSON value into template values, keeping object key order.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("trailing data after JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := exec.Dict{Pairs: []*exec.Pair{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				d.Pairs = setPair(d.Pairs, kt.(string), v)
			}
			_, err := dec.Token() // '}'
			return d, err
		case '[':
			list := []any{}
			for dec.More() {
				v, err := decodeValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token() // ']'
			return list, err
		}
		return nil, fmt.Errorf("unexpected delimiter %v", t)
	case json.Number:
		return pyNumber(t)
	default: // string, bool, nil
		return t, nil
	}
}

// setPair sets key to v, replacing an existing key in place as a Python dict does.
func setPair(pairs []*exec.Pair, key string, v any) []*exec.Pair {
	for _, p := range pairs {
		if p.Key.String() == key {
			p.Value = exec.AsValue(v)
			return pairs
		}
	}
	return append(pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
}

// pyNumber converts a JSON number as Python's json module does: int when it has no fraction or
// exponent, float otherwise.
func pyNumber(n json.Number) (any, error) {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.Atoi(s); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("number %s: %w", s, err)
	}
	return f, nil
}

// newDict builds an ordered template dict from alternating keys and values.
func newDict(kv ...any) exec.Dict {
	d := exec.Dict{Pairs: []*exec.Pair{}}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Pairs = setPair(d.Pairs, kv[i].(string), kv[i+1])
	}
	return d
}
