package tinylmgomlx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
)

// Compare checks that got and want marshal to the same JSON up to tol on numbers: the same keys
// in the same order (the logit rows' creation order), the same strings (sampled responses), and
// numbers within tol. It returns an error naming the first difference and the largest number gap.
func Compare(got, want any, tol float64) (maxDiff float64, err error) {
	gb, err := json.Marshal(got)
	if err != nil {
		return 0, err
	}
	wb, err := json.Marshal(want)
	if err != nil {
		return 0, err
	}
	gd, wd := json.NewDecoder(bytes.NewReader(gb)), json.NewDecoder(bytes.NewReader(wb))
	gd.UseNumber()
	wd.UseNumber()
	var path []string
	for i := 0; ; i++ {
		gt, gerr := gd.Token()
		wt, werr := wd.Token()
		if errors.Is(gerr, io.EOF) && errors.Is(werr, io.EOF) {
			return maxDiff, nil
		}
		if gerr != nil || werr != nil {
			return maxDiff, fmt.Errorf("token %d: got %v (%v), want %v (%v)", i, gt, gerr, wt, werr)
		}
		gn, gok := gt.(json.Number)
		wn, wok := wt.(json.Number)
		if gok && wok {
			g, _ := strconv.ParseFloat(string(gn), 64)
			w, _ := strconv.ParseFloat(string(wn), 64)
			d := math.Abs(g - w)
			maxDiff = math.Max(maxDiff, d)
			if !(d <= tol) {
				return maxDiff, fmt.Errorf("after %v: got %v, want %v (differ by %.3g > %g)", path, g, w, d, tol)
			}
			continue
		}
		if gt != wt {
			return maxDiff, fmt.Errorf("after %v: got %v, want %v", path, gt, wt)
		}
		if s, ok := wt.(string); ok {
			path = append(path[:min(len(path), 3)], s) // a short trail of the last keys/strings seen
		}
	}
}
