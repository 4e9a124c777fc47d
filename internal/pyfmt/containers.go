package pyfmt

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// RoundList is repr([round(x, n) for x in xs]): "[0.729, 0.81]".
func RoundList(xs []float64, n int) string {
	r := make([]float64, len(xs))
	for i, x := range xs {
		r[i] = Round(x, n)
	}
	return List(r)
}

// Str is Python's repr of a str that holds no quote, backslash or control character: 'text'.
func Str(s string) string { return "'" + s + "'" }

// StrList is repr of a list of such strs (see Str): "['→', '←']".
func StrList(xs []string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = Str(x)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// Item is one key of a Dict.
type Item struct {
	Key   string
	Value any
}

// Dict is a JSON object that keeps its keys in insertion order, as a Python dict does (and so
// json.dumps writes them); encoding/json would sort a map's keys.
type Dict []Item

// MarshalJSON writes {"key":value,...} in order; a value's error is wrapped with its key.
func (d Dict) MarshalJSON() ([]byte, error) { return MarshalItems(d) }

// MarshalItems writes items as a Dict does. It serves a package's own ordered-object type of Item's
// shape (a local type keeps unkeyed literals vet-clean): func (o Object) MarshalJSON() ([]byte,
// error) { return pyfmt.MarshalItems(o) }.
func MarshalItems[T ~struct {
	Key   string
	Value any
}](items []T) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, x := range items {
		it := Item(x)
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(it.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(it.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", it.Key, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
