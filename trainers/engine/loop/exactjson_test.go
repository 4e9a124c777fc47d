package loop

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

// A checkpoint's window keeps NaN and infinite sums (encoding/json refuses them: the state used to
// be dropped without a word), and finite values are written exactly as encoding/json writes them.
func TestWindowJSON_KeepsNaNAndInfinities(t *testing.T) {
	w := window{Sums: map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "ninf": math.Inf(-1), "x": 0.1, "tiny": 1e-7},
		MicroBatches: 3, LossSum: math.NaN(), Steps: 2, GradNorm: math.Inf(1)}
	b, err := json.Marshal(extra{OptimizerSteps: 4, Window: w})
	if err != nil {
		t.Fatal(err)
	}
	var got extra
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	g := got.Window
	if !math.IsNaN(g.Sums["nan"]) || !math.IsInf(g.Sums["inf"], 1) || !math.IsInf(g.Sums["ninf"], -1) || g.Sums["x"] != 0.1 ||
		g.Sums["tiny"] != 1e-7 || !math.IsNaN(g.LossSum) || !math.IsInf(g.GradNorm, 1) || g.MicroBatches != 3 || g.Steps != 2 || got.OptimizerSteps != 4 {
		t.Errorf("round trip: %+v from %s", got, b)
	}
	finite := window{Sums: map[string]float64{"a": 1.0 / 3, "b": 1e-7, "c": 2.5e21}, LossSum: 0.25, GradNorm: 3}
	plain := struct {
		Sums         map[string]float64 `json:"sums"`
		MicroBatches int                `json:"micro_batches"`
		LossSum      float64            `json:"loss_sum"`
		Steps        int                `json:"steps"`
		GradNorm     float64            `json:"grad_norm"`
	}{finite.Sums, finite.MicroBatches, finite.LossSum, finite.Steps, finite.GradNorm}
	want, _ := json.Marshal(plain)
	if got, _ := json.Marshal(finite); string(got) != string(want) {
		t.Errorf("finite window written as %s, encoding/json writes %s", got, want)
	}
}

// TestExactWindow: an empty window saves as nil (omitted), a window round-trips through JSON to
// the last bit, and nil restores as an empty window.
func TestExactWindow(t *testing.T) {
	if w := ExactWindow(map[string][]float64{}); w != nil {
		t.Errorf("ExactWindow(empty) = %v, want nil", w)
	}
	if w := FromExactWindow(nil); w == nil || len(w) != 0 {
		t.Errorf("FromExactWindow(nil) = %v, want an empty window", w)
	}
	in := map[string][]float64{"reward": {0.1, 1e-17, math.Inf(-1)}, "kl": {}}
	b, err := json.Marshal(ExactWindow(in))
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]ExactFloats
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if got := FromExactWindow(back); !reflect.DeepEqual(got, in) {
		t.Errorf("round trip: %v, want %v", got, in)
	}
}
