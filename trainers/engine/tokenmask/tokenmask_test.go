package tokenmask_test

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// Masked positions may hold −∞; neither the reductions nor their gradients become NaN.
func TestTokenHelpers_MaskedInfinity(t *testing.T) {
	e, err := step.NewEval(backend.SharedForTests(), func(in []*Node) []*Node {
		x, m := in[0], in[1]
		sum := ReduceAllSum(tokenmask.SeqSum(x, m))
		return []*Node{tokenmask.SeqSum(x, m), tokenmask.SeqMean(x, m), tokenmask.TokenMean(x, m), Gradient(sum, x)[0]}
	})
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.Run([][]float64{{-1, -2, math.Inf(-1)}, {-4, math.NaN(), math.NaN()}}, [][]bool{{true, true, false}, {true, false, false}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]float64{{-3, -4}, {-1.5, -4}, {-7.0 / 3}, {1, 1, 0, 1, 0, 0}} {
		got := step.Float64s(outs[i])
		for j := range want {
			if got[j] != want[j] {
				t.Errorf("output %d = %v, want %v", i, got, want)
				break
			}
		}
	}
}
