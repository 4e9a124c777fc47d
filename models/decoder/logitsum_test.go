package decoder

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
)

// logitSums runs LogitSums, TargetLogitSums and the direct Σ_v Logits(hidden) on batch b of the
// tiny model, each [B,S] flattened, Σ_v |Logits| (the scale of float32 round-off) and
// Σ mask·LogitSums over the real positions.
func logitSums(t *testing.T, ctx *context.Context, cfg *Config, b *Batch) (sums, target, direct, abs []float32, masked float64) {
	t.Helper()
	exec, err := context.NewExec(backend.SharedForTests(), ctx, func(ctx *context.Context, ids, pos, mask *Node) []*Node {
		h := Hidden(ctx, cfg, ids, pos, mask)
		s := LogitSums(ctx, cfg, h)
		m := ConvertDType(mask, dtypes.Float64)
		logits := Logits(ctx, cfg, h) // [B,S,V]: fine for the tiny model
		return []*Node{s, TargetLogitSums(ctx, cfg, h), ReduceSum(logits, -1), ReduceSum(Abs(logits), -1),
			ReduceAllSum(Mul(ConvertDType(s, dtypes.Float64), m))}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	outs, err := exec.Exec(tensors.FromValue(b.IDs), tensors.FromValue(PositionIDs(b.Mask)), tensors.FromValue(b.Mask))
	if err != nil {
		t.Fatal(err)
	}
	flat := func(x *tensors.Tensor) []float32 { f, _ := Float32s(x); return f }
	return flat(outs[0]), flat(outs[1]), flat(outs[2]), flat(outs[3]), tensors.ToScalar[float64](outs[4])
}

// Σ_v logits over the real positions equals the HF float64 reference's logits_checksum.sum, and
// every position's sum equals the direct reduction of the full logits; TargetLogitSums is the same
// shifted one position right, with 0 at t = 0.
func TestLogitSums_MatchFullLogitsAndHF(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	for _, name := range fixtureCases {
		b := readInput(t, name)
		want := readExpected(t, name, "float64").LogitsChecksum
		sums, target, direct, abs, masked := logitSums(t, ctx, cfg, b)
		if scale := want.AbsSum * 1e-6; !near(masked, want.Sum, scale) {
			t.Errorf("%s: Σ over real positions and vocab = %.6f, HF reference %.6f (tol %.2g)", name, masked, want.Sum, scale)
		}
		_, s := b.Dims()
		for i := range sums {
			if !near(float64(sums[i]), float64(direct[i]), 1e-6*float64(abs[i])) {
				t.Errorf("%s position %d: LogitSums %.6f, Σ_v Logits %.6f", name, i, sums[i], direct[i])
			}
			wantTarget := float32(0)
			if i%s != 0 {
				wantTarget = sums[i-1]
			}
			if target[i] != wantTarget {
				t.Errorf("%s position %d: TargetLogitSums %v, want %v", name, i, target[i], wantTarget)
			}
		}
	}
}

// gemma3Dir is the Gemma 3 fixture with final_logit_softcapping 5: its logits reach past ±5, so
// the soft cap changes their sums.
const gemma3Dir = "../testdata/gemma3-tiny"

// With final_logit_softcapping, LogitSums is the sum of the capped logits, Σ_v cap·tanh(z_v/cap),
// not the raw h·Σ_v W_v: every position's sum equals the direct Σ_v Logits (which caps), over the
// real positions it equals the HF float64 reference's logits_checksum.sum (Gemma3ForCausalLM
// caps), whole or in chunks of 2 positions, and no gradient flows through it (a metric). The raw
// sum lies far outside the tolerance, so the test tells the two apart.
func TestLogitSums_Gemma3SoftcapMatchesLogits(t *testing.T) {
	ctx, cfg := loadFixture(t, gemma3Dir, dtypes.Float32)
	if cfg.Gemma == nil || cfg.Gemma.FinalLogitSoftcapping != 5 {
		t.Fatalf("%s: want final_logit_softcapping 5, got %+v", gemma3Dir, cfg.Gemma)
	}
	raw := *cfg
	g := *cfg.Gemma
	raw.Gemma = &g
	raw.Gemma.FinalLogitSoftcapping = 0
	for _, name := range fixtureCases {
		b := readInputIn(t, gemma3Dir, name)
		want := readExpectedIn(t, gemma3Dir, name, "float64").LogitsChecksum
		rows, s := b.Dims()
		for _, chunk := range []int{0, 2} {
			c := *cfg
			c.ChunkElements = chunk * rows * cfg.VocabSize // 0: the default, one chunk here
			sums, target, direct, abs, masked := logitSums(t, ctx, &c, b)
			if scale := want.AbsSum * 1e-6; !near(masked, want.Sum, scale) {
				t.Errorf("%s, chunk %d: Σ over real positions and vocab = %.6f, HF reference %.6f (tol %.2g)", name, chunk, masked, want.Sum, scale)
			}
			for i := range sums {
				if !near(float64(sums[i]), float64(direct[i]), 1e-6*float64(abs[i])) {
					t.Errorf("%s, chunk %d, position %d: LogitSums %.6f, Σ_v Logits %.6f", name, chunk, i, sums[i], direct[i])
				}
				wantTarget := float32(0)
				if i%s != 0 {
					wantTarget = sums[i-1]
				}
				if !near(float64(target[i]), float64(wantTarget), 1e-6*float64(abs[max(0, i-1)])) {
					t.Errorf("%s, chunk %d, position %d: TargetLogitSums %v, want %v", name, chunk, i, target[i], wantTarget)
				}
			}
		}
		_, _, _, _, rawMasked := logitSums(t, ctx, &raw, b)
		if d := math.Abs(rawMasked - want.Sum); d < 100*want.AbsSum*1e-6 {
			t.Errorf("%s: the uncapped sum %.6f is only %.2g from the capped %.6f: the fixture does not test the cap", name, rawMasked, d, want.Sum)
		}
		t.Logf("%s: Σ capped logits %.6f (HF), uncapped %.6f", name, want.Sum, rawMasked)
		if g := logitSumsGradient(t, ctx, cfg, b); g != 0 {
			t.Errorf("%s: Σ|∂ΣLogitSums/∂hidden| = %g, want 0 (a metric: detached)", name, g)
		}
	}
}

// logitSumsGradient is Σ|∂(Σ LogitSums + Σ TargetLogitSums)/∂hidden| on batch b.
func logitSumsGradient(t *testing.T, ctx *context.Context, cfg *Config, b *Batch) float64 {
	t.Helper()
	exec, err := context.NewExec(backend.SharedForTests(), ctx, func(ctx *context.Context, ids, pos, mask *Node) *Node {
		h := Hidden(ctx, cfg, ids, pos, mask)
		total := Add(ReduceAllSum(LogitSums(ctx, cfg, h)), ReduceAllSum(TargetLogitSums(ctx, cfg, h)))
		return ConvertDType(ReduceAllSum(Abs(Gradient(total, h)[0])), dtypes.Float64)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec(tensors.FromValue(b.IDs), tensors.FromValue(PositionIDs(b.Mask)), tensors.FromValue(b.Mask))
	if err != nil {
		t.Fatal(err)
	}
	return tensors.ToScalar[float64](out[0])
}
