package shard_test

import (
	"slices"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend/devicetest"
	"github.com/posttrain/posttrain/internal/shard"
)

// A per-row graph (each row scaled by a replicated variable and a scalar, plus its own sum) run
// with its rows split over 2 and 4 devices gives the one-device rows, for row counts that divide
// by the devices (Exec) and that do not (ExecPadded pads with the last row and cuts it off).
func TestRows_SplitEqualsOneDevice(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	fn := func(ctx *context.Context, in []*Node) []*Node {
		w := ctx.VariableWithValue("w", []float32{1, -2, 0.5}).ValueGraph(in[0].Graph())
		x := Mul(Mul(in[0], ExpandDims(w, 0)), in[1]) // [B,3]; in[1] the scalar input, replicated
		return []*Node{x, ReduceSum(x, -1)}           // [B,3], [B]
	}
	data := func(rows int) [][]float32 {
		out := make([][]float32, rows)
		for r := range out {
			out[r] = []float32{float32(r), float32(r * r), -float32(r) / 3}
		}
		return out
	}
	for _, rows := range []int{4, 5, 7, 8} {
		ctx1 := context.New()
		one, err := context.NewExec(b, ctx1, fn)
		if err != nil {
			t.Fatal(err)
		}
		want, err := one.Exec(data(rows), float32(3))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []int{2, 4} {
			r, err := shard.NewRows(b, n)
			if err != nil {
				t.Fatal(err)
			}
			e, err := context.NewExec(b, context.New(), fn)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.ExecPadded(e, []any{data(rows), float32(3)})
			if err != nil {
				t.Fatalf("%d rows, %d devices: %v", rows, n, err)
			}
			for k := range want {
				if g, w := got[k].Shape(), want[k].Shape(); !g.Equal(w) {
					t.Fatalf("%d rows, %d devices, output %d: shape %s, want %s", rows, n, k, g, w)
				}
				if g, w := tensors.MustCopyFlatData[float32](got[k]), tensors.MustCopyFlatData[float32](want[k]); !slices.Equal(g, w) {
					t.Errorf("%d rows, %d devices, output %d: %v, want %v", rows, n, k, g, w)
				}
			}
			if rows%n == 0 {
				pieces, err := r.Exec(e, []any{data(rows), float32(3)})
				if err != nil {
					t.Fatal(err)
				}
				if len(pieces) != 2 || len(pieces[0]) != n || pieces[0][0].Shape().Dim(0) != rows/n {
					t.Fatalf("%d rows, %d devices: pieces %d×%d of %s, want 2×%d of %d rows", rows, n, len(pieces), len(pieces[0]), pieces[0][0].Shape(), n, rows/n)
				}
				for _, p := range pieces {
					shard.Free(p)
				}
			}
		}
	}
}

// Exec refuses rows that do not divide over the devices, naming the argument.
func TestRows_ExecRefusesUnevenRows(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	r, err := shard.NewRows(b, 4)
	if err != nil {
		t.Fatal(err)
	}
	e, err := context.NewExec(b, context.New(), func(ctx *context.Context, x *Node) *Node { return Neg(x) })
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Exec(e, []any{[]float32{1, 2, 3}})
	if err == nil || err.Error() != "argument 0: 3 rows do not divide over 4 devices" {
		t.Fatalf("Exec: %v", err)
	}
}
