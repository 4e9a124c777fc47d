package tinylm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// goldenTol is how close every number must be to the course's goldens (CPython 3.11, plain sums).
const goldenTol = 1e-12

// node is a JSON value that keeps object key order (the goldens' logits are in row-creation order).
type node struct {
	keys []string // object keys in order; nil for non-objects
	obj  map[string]*node
	arr  []*node
	val  any // float64, string, bool or nil
	kind byte
}

func decodeNode(dec *json.Decoder) (*node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			n := &node{kind: '{', obj: map[string]*node{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				c, err := decodeNode(dec)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k)
				n.obj[k] = c
			}
			_, err := dec.Token()
			return n, err
		}
		n := &node{kind: '['}
		for dec.More() {
			c, err := decodeNode(dec)
			if err != nil {
				return nil, err
			}
			n.arr = append(n.arr, c)
		}
		_, err := dec.Token()
		return n, err
	default:
		return &node{kind: 'v', val: v}, nil
	}
}

func parseNode(t *testing.T, b []byte) *node {
	t.Helper()
	n, err := decodeNode(json.NewDecoder(bytes.NewReader(b)))
	if err != nil {
		t.Fatalf("decode json: %v", err)
	}
	return n
}

// comparison collects what compareNodes saw.
type comparison struct {
	t       errorer
	numbers int
	maxDiff float64
}

// errorer is the part of testing.T that compareNodes uses.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

// compareNodes checks got against want: same keys in the same order, same lengths, equal
// strings and booleans, numbers within goldenTol.
func (c *comparison) compareNodes(path string, got, want *node) {
	t := c.t
	t.Helper()
	if got.kind != want.kind {
		t.Errorf("%s: got kind %c, want %c", path, got.kind, want.kind)
		return
	}
	switch got.kind {
	case '{':
		if fmt.Sprint(got.keys) != fmt.Sprint(want.keys) {
			t.Errorf("%s: keys\n got %q\nwant %q", path, got.keys, want.keys)
			return
		}
		for _, k := range want.keys {
			c.compareNodes(path+"/"+k, got.obj[k], want.obj[k])
		}
	case '[':
		if len(got.arr) != len(want.arr) {
			t.Errorf("%s: got %d items, want %d", path, len(got.arr), len(want.arr))
			return
		}
		for i := range want.arr {
			c.compareNodes(fmt.Sprintf("%s[%d]", path, i), got.arr[i], want.arr[i])
		}
	default:
		gf, gok := got.val.(float64)
		wf, wok := want.val.(float64)
		if gok && wok {
			c.numbers++
			d := math.Abs(gf - wf)
			c.maxDiff = max(c.maxDiff, d)
			if !(d <= goldenTol) {
				t.Errorf("%s = %.17g, want %.17g (diff %.3g)", path, gf, wf, gf-wf)
			}
			return
		}
		if got.val != want.val {
			t.Errorf("%s = %v, want %v", path, got.val, want.val)
		}
	}
}

// checkGolden compares every top-level key of each result with the same key of the golden file,
// and checks that together they cover every golden key but phase and args.
func checkGolden(t *testing.T, file string, results ...any) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	want := parseNode(t, b)
	covered := map[string]bool{"phase": true, "args": true}
	c := &comparison{t: t}
	for _, r := range results {
		gb, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal %T: %v", r, err)
		}
		got := parseNode(t, gb)
		for _, k := range got.keys {
			w, ok := want.obj[k]
			if !ok {
				t.Errorf("%s: result key %q is not in the golden", file, k)
				continue
			}
			covered[k] = true
			c.compareNodes(k, got.obj[k], w)
		}
	}
	for _, k := range want.keys {
		if !covered[k] {
			t.Errorf("%s: golden key %q not produced", file, k)
		}
	}
	t.Logf("%s: %d numbers, max |diff| %.3g", file, c.numbers, c.maxDiff)
	if c.numbers < 40 {
		t.Errorf("%s: only %d numbers compared", file, c.numbers)
	}
}

func TestGolden_Phase08(t *testing.T) { checkGolden(t, "phase08.json", RunPhase8()) }

func TestGolden_Phase09(t *testing.T) { checkGolden(t, "phase09.json", RunRLHF(DefaultRLHF())) }

func TestGolden_Phase10(t *testing.T) {
	checkGolden(t, "phase10.json", RunDPO(DefaultDPO()), RunKTO(DefaultKTO()))
}

func TestGolden_Phase11(t *testing.T) { checkGolden(t, "phase11.json", RunGRPO(DefaultGRPO())) }

func TestGolden_Phase12(t *testing.T) { checkGolden(t, "phase12.json", RunPhase12()) }

// recorder is an errorer that only counts failures.
type recorder struct{ failures int }

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failures++ }

// The comparison can fail: a golden number moved by 1e-11, a reordered logits map, a changed
// sample and a missing row are each caught.
func TestCompareNodes_CatchesDifferences(t *testing.T) {
	base := `{"logits": {"3×4=|": [1.5, 2], "3×4=|1": [0.25, 3]}, "samples_head": [["3×4=", "12⏎"]]}`
	tests := []struct{ name, got string }{
		{"number", `{"logits": {"3×4=|": [1.50000000001, 2], "3×4=|1": [0.25, 3]}, "samples_head": [["3×4=", "12⏎"]]}`},
		{"order", `{"logits": {"3×4=|1": [0.25, 3], "3×4=|": [1.5, 2]}, "samples_head": [["3×4=", "12⏎"]]}`},
		{"sample", `{"logits": {"3×4=|": [1.5, 2], "3×4=|1": [0.25, 3]}, "samples_head": [["3×4=", "1⏎"]]}`},
		{"missing", `{"logits": {"3×4=|": [1.5, 2]}, "samples_head": [["3×4=", "12⏎"]]}`},
	}
	want := parseNode(t, []byte(base))
	for _, tc := range tests {
		r := &recorder{}
		c := &comparison{t: r}
		c.compareNodes("", parseNode(t, []byte(tc.got)), want)
		if r.failures == 0 {
			t.Errorf("%s: difference not caught", tc.name)
		}
	}
	r := &recorder{}
	(&comparison{t: r}).compareNodes("", parseNode(t, []byte(base)), want)
	if r.failures != 0 {
		t.Errorf("identical documents: %d failures", r.failures)
	}
}
