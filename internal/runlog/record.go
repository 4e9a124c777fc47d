// Package runlog writes what a user watches during training: metrics.jsonl (one JSON object per
// logging step, TRL's metric names), completions.jsonl (sampled completions with their rewards),
// and a progress display (a one-line bar on a terminal, plain log lines otherwise).
//
// Number format: integral values (|v| < 2^53) are written as integers; other finite values with
// the shortest representation that round-trips as float32 (the precision the training math has);
// values too large or small for float32 with full float64 precision. JSON has no NaN or infinity,
// so they are written as the strings "NaN", "Infinity" and "-Infinity" (Python's float() and
// ReadMetrics read them back): a diverged loss stays visible instead of becoming null.
package runlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Record is one metrics line: {"step":10,"epoch":0.5,"loss":0.69,"grad_norm":1.2,...}.
type Record struct {
	Step    int                // global optimizer step
	Epoch   float64            // fractional epochs done
	Metrics map[string]float64 // TRL metric names: loss, grad_norm, learning_rate, rewards/chosen, ...
}

// IsEval reports whether the record is an evaluation line (HF's evaluate(): eval_loss, or other
// metrics all prefixed "eval_").
func (r Record) IsEval() bool {
	if _, ok := r.Metrics["eval_loss"]; ok {
		return true
	}
	for k := range r.Metrics {
		if !strings.HasPrefix(k, "eval_") {
			return false
		}
	}
	return len(r.Metrics) > 0
}

// leading are written first, in this order (as HF's Trainer builds its log dict); the other
// metrics follow sorted by name.
var leading = []string{"loss", "grad_norm", "learning_rate"}

// Keys returns the metric names of r in the order they are written.
func (r Record) Keys() []string {
	keys := make([]string, 0, len(r.Metrics))
	for _, k := range leading {
		if _, ok := r.Metrics[k]; ok {
			keys = append(keys, k)
		}
	}
	var rest []string
	for k := range r.Metrics {
		if !slices.Contains(leading, k) && k != "step" && k != "epoch" {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	return append(keys, rest...)
}

// MarshalJSON writes step, epoch, then the metrics (see Keys), with the package's number format.
func (r Record) MarshalJSON() ([]byte, error) {
	buf := []byte(`{"step":`)
	buf = strconv.AppendInt(buf, int64(r.Step), 10)
	buf = append(buf, `,"epoch":`...)
	buf = AppendFloat(buf, r.Epoch)
	for _, k := range r.Keys() {
		buf = append(buf, ',')
		buf = strconv.AppendQuote(buf, k)
		buf = append(buf, ':')
		buf = AppendFloat(buf, r.Metrics[k])
	}
	return append(buf, '}'), nil
}

// AppendFloat appends v in the package's number format (see the package comment).
func AppendFloat(buf []byte, v float64) []byte {
	switch {
	case math.IsNaN(v):
		return append(buf, `"NaN"`...)
	case math.IsInf(v, 1):
		return append(buf, `"Infinity"`...)
	case math.IsInf(v, -1):
		return append(buf, `"-Infinity"`...)
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		return strconv.AppendInt(buf, int64(v), 10)
	}
	if f := float32(v); !math.IsInf(float64(f), 0) && f != 0 {
		return strconv.AppendFloat(buf, float64(f), 'g', -1, 32)
	}
	return strconv.AppendFloat(buf, v, 'g', -1, 64)
}

// ParseRecord reads one metrics line. Values may be numbers, the strings "NaN", "Infinity",
// "-Infinity", or null (read as NaN); "step" is required.
func ParseRecord(line []byte) (Record, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	if err := dec.Decode(&raw); err != nil {
		return Record{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if raw == nil {
		return Record{}, fmt.Errorf("want a JSON object")
	}
	r := Record{Metrics: make(map[string]float64, len(raw))}
	stepRaw, ok := raw["step"]
	if !ok {
		return Record{}, fmt.Errorf(`missing "step"`)
	}
	if err := json.Unmarshal(stepRaw, &r.Step); err != nil {
		return Record{}, fmt.Errorf(`"step": want an integer, got %s`, stepRaw)
	}
	for k, v := range raw {
		if k == "step" {
			continue
		}
		f, err := parseFloat(v)
		if err != nil {
			return Record{}, fmt.Errorf("%q: %w", k, err)
		}
		if k == "epoch" {
			r.Epoch = f
		} else {
			r.Metrics[k] = f
		}
	}
	return r, nil
}

func parseFloat(v json.RawMessage) (float64, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err == nil {
		if string(v) == "null" {
			return math.NaN(), nil
		}
		return f, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		switch s {
		case "NaN":
			return math.NaN(), nil
		case "Infinity":
			return math.Inf(1), nil
		case "-Infinity":
			return math.Inf(-1), nil
		}
	}
	return 0, fmt.Errorf("want a number, got %s", v)
}
