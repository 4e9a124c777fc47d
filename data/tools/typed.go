package tools

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Typed returns calls with their string arguments cast by the schemas of s's tools, as
// transformers 5.x's response parser casts them when TRL 1.x passes the tools (response_parser.py
// _coerce_tool_calls): an argument declared integer, number, boolean, null, object or array (its
// "type", a list of types, anyOf/oneOf, nullable) that the model wrote as a string is read as the
// first of those types it parses as ("3" → 3, "3.0" → 3 for an integer, "true"/"1" → true, "null"
// → nil, "[1, 2]" → a list); a string that parses as none, and every argument of a tool s does
// not have, stays as written. Lists of strings where no array is declared are cast item by item.
func (s Set) Typed(calls []Call) []Call {
	out := make([]Call, len(calls))
	for i, c := range calls {
		out[i] = c
		if c.Err != "" || c.Arguments == nil {
			continue
		}
		var props map[string]json.RawMessage
		for _, t := range s {
			if t.Name() == c.Name {
				props = schemaProperties(t.Schema())
				break
			}
		}
		if props == nil {
			continue
		}
		args := make(map[string]any, len(c.Arguments))
		for k, v := range c.Arguments {
			args[k] = v
			types := schemaTypes(props[k])
			if len(types) == 0 {
				continue
			}
			switch x := v.(type) {
			case string:
				args[k] = coerce(x, types)
			case []any:
				if !contains(types, "array") {
					items := make([]any, len(x))
					for j, it := range x {
						items[j] = it
						if str, ok := it.(string); ok {
							items[j] = coerce(str, types)
						}
					}
					args[k] = items
				}
			}
		}
		out[i].Arguments = args
	}
	return out
}

// schemaProperties are a tool schema's parameter properties ({"function": {"parameters":
// {"properties": …}}}, or the function object itself).
func schemaProperties(schema json.RawMessage) map[string]json.RawMessage {
	var tool struct {
		Function   *json.RawMessage `json:"function"`
		Parameters *struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"parameters"`
	}
	if json.Unmarshal(schema, &tool) != nil {
		return nil
	}
	if tool.Function != nil {
		var fn struct {
			Parameters *struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"parameters"`
		}
		if json.Unmarshal(*tool.Function, &fn) != nil || fn.Parameters == nil {
			return nil
		}
		return fn.Parameters.Properties
	}
	if tool.Parameters == nil {
		return nil
	}
	return tool.Parameters.Properties
}

// schemaTypes is transformers' _schema_types: the declared type(s), those of anyOf and oneOf, and
// null for nullable.
func schemaTypes(raw json.RawMessage) []string {
	var s struct {
		Type     json.RawMessage   `json:"type"`
		AnyOf    []json.RawMessage `json:"anyOf"`
		OneOf    []json.RawMessage `json:"oneOf"`
		Nullable bool              `json:"nullable"`
	}
	if len(raw) == 0 || json.Unmarshal(raw, &s) != nil {
		return nil
	}
	var types []string
	var one string
	var many []any
	if json.Unmarshal(s.Type, &one) == nil {
		types = append(types, one)
	} else if json.Unmarshal(s.Type, &many) == nil {
		for _, t := range many {
			if str, ok := t.(string); ok {
				types = append(types, str)
			}
		}
	}
	for _, c := range append(s.AnyOf, s.OneOf...) {
		types = append(types, schemaTypes(c)...)
	}
	if s.Nullable && !contains(types, "null") {
		types = append(types, "null")
	}
	return types
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// coerce is transformers' _coerce: raw read as the first of types it parses as, else raw.
func coerce(raw string, types []string) any {
	for _, t := range types {
		switch t {
		case "integer":
			if n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, 64); err == nil {
				return n
			}
			f, err := pyFloat(raw)
			if err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
				continue
			}
			return int64(f)
		case "number":
			f, err := pyFloat(raw)
			if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
				continue
			}
			if f == math.Trunc(f) && !strings.Contains(raw, ".") {
				return int64(f)
			}
			return f
		case "boolean":
			switch strings.ToLower(strings.TrimSpace(raw)) {
			case "true", "1":
				return true
			case "false", "0":
				return false
			}
		case "null":
			if s := strings.TrimSpace(raw); s == "null" || s == "None" {
				return nil
			}
		case "object", "array":
			var v any
			if json.Unmarshal([]byte(raw), &v) != nil {
				continue
			}
			if _, ok := v.(map[string]any); ok && t == "object" {
				return v
			}
			if _, ok := v.([]any); ok && t == "array" {
				return v
			}
		}
	}
	return raw
}

// pyFloat is Python's float() of a string: surrounding whitespace allowed, "inf", "nan".
func pyFloat(raw string) (float64, error) {
	return strconv.ParseFloat(strings.TrimSpace(raw), 64)
}
