package trainable

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/lora"
)

// ShapeModel is a model of cfg's shape held as a trainer holds it, whose weights have shapes and
// no values: nothing of their size is allocated, so a 7B model's training graphs can be built
// and compiled on a small machine (loop.Optimizer.Plan reads XLA's memory plan of them), but not
// run. dtype is Model.DType: Float32, or BFloat16 with float32 masters (under an adapter, the
// frozen base weights in bfloat16 without masters, as ToBF16). adapter, when set, attaches a
// LoRA adapter first (its A and B, which are small, get values); value, when set, is the config
// of a value model trained beside it (AttachValue: PPO's, a classifier with one label).
func ShapeModel(cfg *decoder.Config, dtype dtypes.DType, adapter *lora.Config, value *decoder.Config) (*Model, error) {
	if dtype != dtypes.Float32 && dtype != dtypes.BFloat16 {
		return nil, fmt.Errorf("model: compute dtype must be float32 or bfloat16, got %s", dtype)
	}
	if adapter != nil && value != nil {
		return nil, fmt.Errorf("model: a value model cannot be trained beside a LoRA adapter")
	}
	m := &Model{Config: cfg, Ctx: context.New(), DType: dtypes.Float32}
	declare := func(prefix string, cfg *decoder.Config) {
		for _, s := range cfg.Tensors() {
			scope, name := decoder.VarScope(s.Name)
			m.Ctx.InAbsPath(prefix+scope).Checked(false).VariableWithShape(name, shapes.Make(dtypes.Float32, s.Shape...))
		}
	}
	declare("", cfg)
	if value != nil {
		declare(ValueScope, value)
		m.Value = &Model{Config: value, Ctx: m.Ctx, DType: dtypes.Float32, Prefix: ValueScope}
	}
	if adapter != nil {
		if err := m.AttachAdapter(*adapter, 1); err != nil {
			return nil, err
		}
	}
	if dtype == dtypes.Float32 {
		return m, nil
	}
	trained, _, err := m.Params()
	if err != nil {
		return nil, err
	}
	if m.Adapter != nil {
		more, _, err := m.Adapter.Vars(m.Ctx)
		if err != nil {
			return nil, err
		}
		trained = append(trained, more...)
	}
	if m.Value != nil {
		more, _, err := m.Value.Params()
		if err != nil {
			return nil, err
		}
		trained = append(trained, more...)
		m.Value.DType = dtypes.BFloat16
	}
	bf := m.Ctx.Checked(false)
	for _, v := range trained {
		if v.DType() != dtypes.Float32 || strings.HasPrefix(v.Scope(), lora.LoRAScope+"/") {
			continue
		}
		if m.Adapter == nil || strings.HasPrefix(v.Scope(), lora.SavedScope+"/") {
			m.Ctx.InAbsPath(MasterScope+v.Scope()).Checked(false).VariableWithShape(v.Name(), v.Shape()).SetTrainable(false)
		}
		if err := bf.InAbsPath(v.Scope()).DeleteVariable(v.Scope(), v.Name()); err != nil {
			return nil, err
		}
		bf.InAbsPath(v.Scope()).VariableWithShape(v.Name(), shapes.Make(dtypes.BFloat16, v.Shape().Dimensions...)).SetTrainable(v.Trainable)
	}
	m.DType = dtypes.BFloat16
	return m, nil
}
