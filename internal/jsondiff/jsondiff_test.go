package jsondiff

import (
	"encoding/json"
	"reflect"
	"testing"
)

func decode(t *testing.T, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestDiff(t *testing.T) {
	want := `{"a": [1, 2.5], "b": {"c": "x", "d": null, "e": true}}`
	for _, tc := range []struct {
		got  string
		tol  float64
		want []string
	}{
		{`{"b": {"e": true, "d": null, "c": "x"}, "a": [1, 2.5]}`, 0, nil},
		{`{"a": [1, 2.5000001], "b": {"c": "x", "d": null, "e": true}}`, 1e-6, nil},
		{`{"a": [1, 2.5000001], "b": {"c": "x", "d": null, "e": true}}`, 1e-12, []string{".a[1]: got 2.5000001, want 2.5"}},
		{`{"a": [1], "b": {"c": "y", "e": true, "f": 0}}`, 0, []string{
			".a: got [1], want [1 2.5]", ".b.c: got y, want x", ".b.d: in got false, in want true", ".b.f: in got true, in want false"}},
		{`{"a": "1", "b": []}`, 0, []string{".a: got 1, want [1 2.5]", ".b: got []interface {}, want an object"}},
		{`{"a": [1, "2.5"], "b": {"c": "x", "d": null, "e": 1}}`, 1, []string{".a[1]: got 2.5, want 2.5", ".b.e: got 1, want true"}},
	} {
		if got := Diff("", decode(t, tc.got), decode(t, want), tc.tol); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Diff(%s) = %q, want %q", tc.got, got, tc.want)
		}
	}
}
