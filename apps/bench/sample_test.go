package bench

import (
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/generate"
)

// Rows are compared up to their first different token; the first difference is named.
func TestSample_CountsUpToFirstDifference(t *testing.T) {
	gen := func(ids []int32, lps ...float64) generate.Generation {
		return generate.Generation{IDs: ids, LogProbs: lps}
	}
	var r SampleResult
	r.add("x", []generate.Generation{gen([]int32{1, 2, 3}, -1, -2, -3), gen([]int32{4, 5, 6}, -1, -1, -1)},
		[]generate.Generation{gen([]int32{1, 2, 3}, -1, -2.5, -3), gen([]int32{4, 7, 6}, -1, -1, -1)})
	c := r.Cases[0]
	if c.Tokens != 6 || c.TokensEqual != 4 || c.RowsEqual != 1 || c.MaxLPDiff != 0.5 {
		t.Errorf("got %+v, want 6 tokens, 4 equal, 1 row equal, max |Δ| 0.5", c)
	}
	if !strings.Contains(r.FirstDiff, "x row 1 token 1") {
		t.Errorf("first difference %q, want row 1 token 1", r.FirstDiff)
	}
}

// Every token must agree when the log-probs agree to float32 rounding; with TF32-sized
// differences a few flips pass, many do not.
func TestSample_Verdict(t *testing.T) {
	for _, c := range []struct {
		equal int
		lp    float64
		pass  bool
	}{{100, 1e-7, true}, {99, 1e-7, false}, {95, 2e-3, true}, {80, 2e-3, false}, {100, 2e-3, true}} {
		r := SampleResult{Tokens: 100, TokensEqual: c.equal, MaxLogProbDiff: c.lp, Strict: c.lp <= SampleStrictLP}
		if err := r.Verdict(); (err == nil) != c.pass {
			t.Errorf("%d of 100 equal at |Δ| %g: err %v, want pass %v", c.equal, c.lp, err, c.pass)
		}
	}
}
