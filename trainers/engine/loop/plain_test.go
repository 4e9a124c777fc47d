package loop_test

import (
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/sft"
)

// With step.Plain the driver's optimizer takes the plain gradient step θ ← θ − lr·g on the
// accumulated gradient (float32, as the host computes it), keeps no moments and saves none.
func TestOptimizer_PlainStep(t *testing.T) {
	m := looptest.Load(t, referenceModel(t), false)
	tr, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 1, 1)), sft.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	opt, err := loop.NewOptimizer(looptest.Backend(t), m, loop.OptimizerConfig{Optimizer: step.Plain}, tr.Loss)
	if err != nil {
		t.Fatal(err)
	}
	defer opt.Close()
	batch, _, err := decoder.ReadBatchJSON(filepath.Join(referenceFixture, "inputs/left_pad.json"))
	if err != nil {
		t.Fatal(err)
	}
	rows := trainable.Rows{IDs: batch.IDs, Mask: batch.Mask, Pos: decoder.PositionIDs(batch.Mask),
		Loss: decoder.ScoredMask(batch.Mask, batch.CompletionStart)}
	if _, _, err := opt.Micro(rows.Inputs(), 1); err != nil {
		t.Fatal(err)
	}
	vars, names, err := m.Params()
	if err != nil {
		t.Fatal(err)
	}
	before, grads := make([][]float32, len(vars)), make([][]float32, len(vars))
	for i, v := range vars {
		before[i] = values(t, v)
		grads[i] = values(t, m.Ctx.GetVariableByScopeAndName(loop.GradScope+v.Scope(), v.Name()))
		if m.Ctx.GetVariableByScopeAndName(loop.ExpAvgScope+v.Scope(), v.Name()) != nil {
			t.Errorf("%s has an AdamW moment under the plain step", names[i])
		}
	}
	const lr = 0.5
	if _, err := opt.Apply(lr); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for i, v := range vars {
		for j, got := range values(t, v) {
			want := before[i][j] - float32(grads[i][j]*float32(lr))
			if got != want {
				t.Fatalf("%s[%d] = %v after the step, want %v − %v·%v = %v", names[i], j, got, before[i][j], lr, grads[i][j], want)
			}
			if got != before[i][j] {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Error("no weight moved")
	}
	path := filepath.Join(t.TempDir(), "optimizer.safetensors")
	if err := opt.WriteState(path); err != nil {
		t.Fatal(err)
	}
	if err := opt.ReadState(path, 1); err != nil {
		t.Fatal(err)
	}
}
