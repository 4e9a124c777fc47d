package corridor

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// phaseRun runs one phase at the course's defaults.
type phaseRun struct {
	phase int
	args  Object
	run   func() (Result, error)
}

var phases = []phaseRun{
	{1, DefaultPhase1().Args(), func() (Result, error) { return RunPhase1(DefaultPhase1()) }},
	{2, DefaultPhase2().Args(), func() (Result, error) { return RunPhase2(DefaultPhase2()) }},
	{3, DefaultPhase3().Args(), func() (Result, error) { return RunPhase3(DefaultPhase3()) }},
	{4, DefaultPhase4().Args(), func() (Result, error) { return RunPhase4(DefaultPhase4()) }},
	{5, DefaultPhase5().Args(), func() (Result, error) { return RunPhase5(DefaultPhase5()) }},
	{6, DefaultPhase6().Args(), func() (Result, error) { return RunPhase6(DefaultPhase6()) }},
	{7, DefaultPhase7().Args(), func() (Result, error) { return RunPhase7(DefaultPhase7()) }},
}

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each phase prints exactly the course's lines (testdata/expected, copied from the course).
func TestPhases_PrintCourseLines(t *testing.T) {
	for _, p := range phases {
		t.Run(fmt.Sprintf("phase%02d", p.phase), func(t *testing.T) {
			r, err := p.run()
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(r.Lines(), "\n") + "\n"
			want := string(readTestdata(t, fmt.Sprintf("expected/phase%02d.txt", p.phase)))
			if got != want {
				t.Errorf("printed lines differ\ngot:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// Each phase's results agree with the course's golden JSON to 1e-12, with exactly its keys.
func TestPhases_MatchGolden(t *testing.T) {
	for _, p := range phases {
		t.Run(fmt.Sprintf("phase%02d", p.phase), func(t *testing.T) {
			r, err := p.run()
			if err != nil {
				t.Fatal(err)
			}
			args := append(Object{{"json", true}}, p.args...)
			got := append(Object{{"phase", p.phase}, {"args", args}}, r.Results()...)
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var gotV, wantV any
			if err := json.Unmarshal(b, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(readTestdata(t, fmt.Sprintf("golden/phase%02d.json", p.phase)), &wantV); err != nil {
				t.Fatal(err)
			}
			for _, d := range CompareJSON("", gotV, wantV, 1e-12) {
				t.Error(d)
			}
		})
	}
}

// CompareJSON lists the differences between two decoded JSON values: object keys must match,
// numbers agree to tol (absolute).
func CompareJSON(path string, got, want any, tol float64) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: got %T, want object", path, got)}
		}
		var diffs []string
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
		for _, k := range keys {
			gv, gok := g[k]
			wv, wok := w[k]
			if !gok || !wok {
				diffs = append(diffs, fmt.Sprintf("%s.%s: present in got=%v want=%v", path, k, gok, wok))
				continue
			}
			diffs = append(diffs, CompareJSON(path+"."+k, gv, wv, tol)...)
		}
		return diffs
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
		}
		var diffs []string
		for i := range w {
			diffs = append(diffs, CompareJSON(fmt.Sprintf("%s[%d]", path, i), g[i], w[i], tol)...)
		}
		return diffs
	case float64:
		g, ok := got.(float64)
		if !ok || !(math.Abs(g-w) <= tol) {
			return []string{fmt.Sprintf("%s: got %v, want %.17g", path, got, w)}
		}
		return nil
	default:
		if got != want {
			return []string{fmt.Sprintf("%s: got %v, want %v", path, got, want)}
		}
		return nil
	}
}
