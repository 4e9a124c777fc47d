package corridor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/jsondiff"
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
			for _, d := range jsondiff.Diff("", gotV, wantV, 1e-12) {
				t.Error(d)
			}
		})
	}
}
