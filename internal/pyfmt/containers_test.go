package pyfmt

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// A Dict keeps its insertion order (Python 3.7+ dicts), nested or not; a map would be sorted.
func TestDict_KeepsOrder(t *testing.T) {
	d := Dict{{"z", 1}, {"a", Dict{{"y", []float64{0.5}}, {"b", nil}}}, {"é<", "x"}}
	got, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z":1,"a":{"y":[0.5],"b":null},"é\u003c":"x"}`; string(got) != want {
		t.Errorf("json.Marshal(Dict) = %s, want %s", got, want)
	}
	if got, err := json.Marshal(Dict{}); err != nil || string(got) != "{}" {
		t.Errorf("json.Marshal(Dict{}) = %s, %v; want {}", got, err)
	}
}

// A value that cannot be marshalled fails with its key named.
func TestDict_ErrorNamesKey(t *testing.T) {
	_, err := json.Marshal(Dict{{"ok", 1}, {"loss", math.NaN()}})
	if err == nil || !strings.Contains(err.Error(), "loss: ") {
		t.Errorf("json.Marshal(Dict with NaN) error = %v, want one naming key loss", err)
	}
}
