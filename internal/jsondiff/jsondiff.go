// Package jsondiff compares decoded JSON values for golden-file tests: the same object keys,
// the same arrays, numbers within an absolute tolerance, everything else equal.
package jsondiff

import (
	"fmt"
	"math"
	"sort"
)

// Diff lists the differences between two values decoded by encoding/json into any (objects,
// arrays, float64 numbers, strings, bools, nil), one line per difference named by its path
// (".key[3]"). Object keys must match in both directions; numbers agree to tol (absolute).
func Diff(path string, got, want any, tol float64) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %T, want an object", path, got)}
		}
		keys := make([]string, 0, len(w)+len(g))
		for k := range w {
			keys = append(keys, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		var diffs []string
		for _, k := range keys {
			gv, gok := g[k]
			wv, wok := w[k]
			if !gok || !wok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: in got %v, in want %v", path, k, gok, wok))
				continue
			}
			diffs = append(diffs, Diff(path+"."+k, gv, wv, tol)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, Diff(fmt.Sprintf("%s[%d]", path, i), g[i], w[i], tol)...)
		}
		return diffs
	case float64:
		if g, ok := got.(float64); !ok || !(math.Abs(g-w) <= tol) {
			return []string{fmt.Sprintf("%s: got %v, want %.17g", path, got, w)}
		}
		return nil
	}
	if got != want {
		return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
	}
	return nil
}
