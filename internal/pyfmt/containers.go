package pyfmt

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Item is one key of a Dict.
type Item struct {
	Key   string
	Value any
}

// Dict is a JSON object that keeps its keys in insertion order, as a Python dict does (and so
// json.dumps writes them); encoding/json would sort a map's keys.
type Dict []Item

// MarshalJSON writes {"key":value,...} in order; a value's error is wrapped with its key.
func (d Dict) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, it := range d {
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
