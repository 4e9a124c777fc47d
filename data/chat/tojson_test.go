package chat

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Expected strings are Python 3's json.dumps output: repr(float), but NaN/Infinity for nan/inf.
func TestPyFloatJSON(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{1, "1.0"}, {math.Copysign(0, -1), "-0.0"}, {0, "0.0"}, {0.1, "0.1"}, {1e-4, "0.0001"}, {1e-5, "1e-05"},
		{1.5e-7, "1.5e-07"}, {123456789.25, "123456789.25"}, {1e15, "1000000000000000.0"},
		{1234567890123456, "1234567890123456.0"}, {1e16, "1e+16"}, {1.25e100, "1.25e+100"},
		{math.MaxFloat64, "1.7976931348623157e+308"}, {5e-324, "5e-324"}, {2.5, "2.5"}, {-3.75, "-3.75"},
		{1.0 / 3, "0.3333333333333333"}, {100, "100.0"},
		{math.NaN(), "NaN"}, {math.Inf(1), "Infinity"}, {math.Inf(-1), "-Infinity"},
	} {
		if got := pyFloatJSON(tc.f); got != tc.want {
			t.Errorf("pyFloatJSON(%v) = %q, want %q", tc.f, got, tc.want)
		}
	}
}

// json.dumps({"a": [1, 2.0, None, True], "é": "\x00\"\\\n\u2028😀"}, ensure_ascii=False)
func TestPyJSON(t *testing.T) {
	v, err := decodeJSON([]byte(`{"a": [1, 2.0, null, true], "é": "\u0000\"\\\n\u2028😀", "b": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	got, err := PyJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"a\": [1, 2.0, null, true], \"é\": \"\\u0000\\\"\\\\\\n\u2028😀\", \"b\": {}}"
	if got != want {
		t.Errorf("PyJSON:\n got %s\nwant %s", got, want)
	}
	var ascii = pyJSONDefaults(false)
	ascii.ensureASCII = true
	var b = new(stringsBuilder)
	if err := writePyJSON(&b.Builder, "é😀", ascii, 0); err != nil {
		t.Fatal(err)
	}
	if b.String() != `"\u00e9\ud83d\ude00"` {
		t.Errorf("ensure_ascii: got %s", b.String())
	}
	if _, err := PyJSON(func() {}); err == nil {
		t.Error("PyJSON(func): want an error")
	}
}

type stringsBuilder struct{ strings.Builder }

func TestStrftime(t *testing.T) {
	tm := time.Date(2024, 7, 5, 15, 4, 9, 0, time.UTC)
	// Python: datetime(2024, 7, 5, 15, 4, 9).strftime(...)
	for format, want := range map[string]string{
		"%d %b %Y":              "05 Jul 2024",
		"%A, %B %e %y %H:%M:%S": "Friday, July  5 24 15:04:09",
		"%I%p %j %% %Q Mon 1":   "03PM 187 % %Q Mon 1",
	} {
		if got := strftime(tm, format); got != want {
			t.Errorf("strftime(%q) = %q, want %q", format, got, want)
		}
	}
}
