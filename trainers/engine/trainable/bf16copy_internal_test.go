package trainable

import (
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
)

// The optimizer's bf16 copy of a master has the host's bits (toBF16, which a resume uses), on
// the tests' backend, for values that round-to-nearest-even would round up (1 + 2⁻⁸ + 2⁻¹⁶: the
// cut bits are above half), ties, negatives, and values that cut exactly.
func TestCopyOfMaster_MatchesHostBF16(t *testing.T) {
	x := []float32{1 + 0x1p-8 + 0x1p-16, 1 + 0x1p-8, -(1 + 0x1p-7 + 0x1p-9), 3.140625, 1e-3, -65504, 0}
	x = append(x, math.Float32frombits(0x3f80ffff)) // 1.0078124: everything below the cut set
	b := backend.MustNewForTests()
	exec, err := NewExec(b, func(v *Node) *Node { return CopyOfMaster(v, dtypes.BFloat16) })
	if err != nil {
		t.Fatal(err)
	}
	outs, err := exec.Exec(x)
	if err != nil {
		t.Fatal(err)
	}
	got := tensors.MustCopyFlatData[bfloat16.BFloat16](outs[0])
	want := tensors.MustCopyFlatData[bfloat16.BFloat16](toBF16(tensors.FromFlatDataAndDimensions(x, len(x))))
	if !slices.Equal(got, want) {
		t.Errorf("%s: in-graph bf16 copies %v, host's %v", backend.ForTests(), got, want)
	}
}
