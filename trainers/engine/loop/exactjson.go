package loop

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// Checkpoints hold running sums of metrics, which can be NaN or infinite (a reward function that
// never applies has a NaN mean; a diverging run an infinite loss). JSON has no such numbers, and
// encoding/json refuses them, so a checkpoint would lose the state it was written for. ExactFloat
// writes finite values as encoding/json does and the others as runlog writes them in
// metrics.jsonl ("NaN", "Infinity", "-Infinity"), and reads both back exactly.

// ExactFloat is a float64 whose JSON form keeps NaN and infinities.
type ExactFloat float64

// MarshalJSON implements json.Marshaler.
func (f ExactFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"Infinity"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Infinity"`), nil
	}
	return json.Marshal(v)
}

// UnmarshalJSON implements json.Unmarshaler: a number, or one of the three strings.
func (f *ExactFloat) UnmarshalJSON(b []byte) error {
	s := string(b)
	var str string
	if json.Unmarshal(b, &str) == nil {
		s = str
	}
	v, err := strconv.ParseFloat(s, 64) // also reads "NaN", "Infinity" and "-Infinity"
	if err != nil {
		return fmt.Errorf("exact float %s: %w", b, err)
	}
	*f = ExactFloat(v)
	return nil
}

// ExactFloats is a list of ExactFloat.
type ExactFloats []float64

// MarshalJSON implements json.Marshaler.
func (fs ExactFloats) MarshalJSON() ([]byte, error) {
	out := make([]ExactFloat, len(fs))
	for i, v := range fs {
		out[i] = ExactFloat(v)
	}
	return json.Marshal(out)
}

// UnmarshalJSON implements json.Unmarshaler.
func (fs *ExactFloats) UnmarshalJSON(b []byte) error {
	var in []ExactFloat
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*fs = make(ExactFloats, len(in))
	for i, v := range in {
		(*fs)[i] = float64(v)
	}
	return nil
}

// ExactWindow is a source's logging window (metric → its unlogged values) as a checkpoint saves
// it: nil when empty (a logging step), so that an omitempty field leaves it out.
func ExactWindow(w map[string][]float64) map[string]ExactFloats {
	var out map[string]ExactFloats
	for k, vs := range w {
		if out == nil {
			out = map[string]ExactFloats{}
		}
		out[k] = vs
	}
	return out
}

// FromExactWindow is ExactWindow's inverse, an empty window for nil.
func FromExactWindow(w map[string]ExactFloats) map[string][]float64 {
	out := map[string][]float64{}
	for k, vs := range w {
		out[k] = vs
	}
	return out
}

// windowJSON is window's checkpoint form, with exact floats.
type windowJSON struct {
	Sums         map[string]ExactFloat `json:"sums"`
	MicroBatches int                   `json:"micro_batches"`
	LossSum      ExactFloat            `json:"loss_sum"`
	Steps        int                   `json:"steps"`
	GradNorm     ExactFloat            `json:"grad_norm"`
}

// MarshalJSON implements json.Marshaler.
func (w window) MarshalJSON() ([]byte, error) {
	j := windowJSON{MicroBatches: w.MicroBatches, LossSum: ExactFloat(w.LossSum), Steps: w.Steps, GradNorm: ExactFloat(w.GradNorm)}
	if w.Sums != nil {
		j.Sums = make(map[string]ExactFloat, len(w.Sums))
		for k, v := range w.Sums {
			j.Sums[k] = ExactFloat(v)
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON implements json.Unmarshaler.
func (w *window) UnmarshalJSON(b []byte) error {
	var j windowJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*w = window{MicroBatches: j.MicroBatches, LossSum: float64(j.LossSum), Steps: j.Steps, GradNorm: float64(j.GradNorm)}
	if j.Sums != nil {
		w.Sums = make(map[string]float64, len(j.Sums))
		for k, v := range j.Sums {
			w.Sums[k] = float64(v)
		}
	}
	return nil
}
