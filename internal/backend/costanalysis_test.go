//go:build !noxla

package backend

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// XLA's cost analysis of a compiled graph reaches Graph.CostAnalysis (third_party's go-xla and
// GoMLX cost-analysis patches): where the plugin implements PJRT_Executable_GetCostAnalysis, a
// [64,128]×[128,32] float32 product is 2·64·128·32 flops and reads and writes at least its operands
// and result. XLA's CPU plugin (jax 0.11.2's) does not implement it: its own UNIMPLEMENTED error
// comes back as the error, not as an empty or zero analysis.
func TestXLA_CostAnalysis(t *testing.T) {
	needCPUPlugin(t)
	b := MustNew(DefaultCPU)
	const m, k, n = 64, 128, 32
	g := graph.NewGraph(b, "matmul")
	x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, m, k))
	y := graph.Parameter(g, "y", shapes.Make(dtypes.Float32, k, n))
	g.Compile(graph.MatMul(x, y))
	cost, err := g.CostAnalysis()
	if err != nil {
		if !strings.Contains(err.Error(), "code=12") || !strings.Contains(err.Error(), "GetCostAnalysis is not implemented") {
			t.Fatalf("not the plugin's UNIMPLEMENTED: %v", err)
		}
		t.Logf("%s: %v", DefaultCPU, err)
		return
	}
	if got, want := cost["flops"], float64(2*m*k*n); got != want {
		t.Errorf("flops %v, want %v (all: %v)", got, want, cost)
	}
	if got, min := cost["bytes accessed"], float64(4*(m*k+k*n+m*n)); !(got >= min) {
		t.Errorf("bytes accessed %v, want at least the operands and result's %v (all: %v)", got, min, cost)
	}
	t.Logf("cost analysis: %v", cost)
}
