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

// A package's own type of Item's shape marshals as a Dict.
func TestMarshalItems_OwnType(t *testing.T) {
	type field struct {
		Key   string
		Value any
	}
	got, err := MarshalItems([]field{{"b", 2.5}, {"a", []string{"x"}}})
	if want := `{"b":2.5,"a":["x"]}`; err != nil || string(got) != want {
		t.Errorf("MarshalItems = %s, %v; want %s", got, err, want)
	}
}

// Expected strings are what CPython 3.11 prints.
func TestContainerReprs(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{RoundList([]float64{0.7290001, 0.81, -0.00004}, 3), "[0.729, 0.81, -0.0]"},
		{RoundList([]float64{2.675, 1}, 2), "[2.67, 1.0]"},
		{RoundList(nil, 2), "[]"},
		{Str("12⏎"), "'12⏎'"},
		{StrList([]string{"→", "←"}), "['→', '←']"},
		{StrList(nil), "[]"},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}
}
