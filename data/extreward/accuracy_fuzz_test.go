package extreward

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// MathAccuracy on any solution and completion text returns 1, 0 or NaN, without a panic (the
// parser divides, takes roots and powers of what it reads), and the same again.
func FuzzMathAccuracy(f *testing.F) {
	if b, err := os.ReadFile("testdata/accuracy_reward.json"); err == nil {
		var g struct{ Cases []accuracyCase }
		if json.Unmarshal(b, &g) == nil {
			for _, k := range g.Cases {
				f.Add(k.Solution, k.Completion)
			}
		}
	}
	f.Add(`$\frac{1}{0}$`, `\boxed{0^{-1}}`)
	f.Add(`$2^{64}$`, `\boxed{\sqrt{-4}}`)
	f.Fuzz(func(t *testing.T, solution, completion string) {
		r := MathAccuracy(solution, completion)
		if r != 0 && r != 1 && !math.IsNaN(r) {
			t.Fatalf("MathAccuracy(%q, %q) = %v", solution, completion, r)
		}
		if r2 := MathAccuracy(solution, completion); r2 != r && !(math.IsNaN(r) && math.IsNaN(r2)) {
			t.Fatalf("MathAccuracy(%q, %q) = %v, then %v", solution, completion, r, r2)
		}
	})
}
