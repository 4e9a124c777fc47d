package lora

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/safetensors"
)

// Load attaches the PEFT LoRA adapter saved in dir (adapter_config.json,
// adapter_model.safetensors) to ctx, which holds the base model's weights (decoder.Load, any
// dtype): every graph built on ctx then runs the adapted model. An adapter that does not fit the
// base (a target module or modules_to_save the model has not, a tensor of another shape, a
// missing or unexpected tensor) is an error naming it.
func Load(ctx *context.Context, cfg *decoder.Config, dir string) (*Adapter, error) {
	c, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	a, err := New(cfg, c)
	if err != nil {
		return nil, fmt.Errorf("adapter %s: %w", dir, err)
	}
	if err := a.Attach(ctx, 0); err != nil {
		return nil, err
	}
	stored, err := ReadWeights(dir)
	if err != nil {
		return nil, err
	}
	if err := a.SetWeights(ctx, stored, filepath.Join(dir, WeightsName)); err != nil {
		decoder.SetAdapter(ctx, nil)
		return nil, err
	}
	return a, nil
}

// SetWeights sets the adapter's variables in ctx from stored tensors keyed by PEFT name, each
// converted to its variable's dtype; source names the file in errors.
func (a *Adapter) SetWeights(ctx *context.Context, stored map[string]*safetensors.Tensor, source string) error {
	vars, names, err := a.Vars(ctx)
	if err != nil {
		return err
	}
	for name := range stored {
		if !slices.Contains(names, name) {
			return fmt.Errorf("%s: tensor %s is not a tensor of this adapter on the model (its adapted layers: %s)", source, name, strings.Join(a.Modules(), ", "))
		}
	}
	for i, v := range vars {
		f, err := safetensors.Float32sShaped(stored, names[i], v.Shape().Dimensions)
		if err != nil {
			return fmt.Errorf("%s: %w (the model's layer; an adapter of another base model?)", source, err)
		}
		if err := v.SetValue(asDType(f, v.Shape().Dimensions, v.DType())); err != nil {
			return err
		}
	}
	return nil
}

func asDType(f []float32, shape []int, dtype dtypes.DType) *tensors.Tensor {
	if dtype == dtypes.BFloat16 {
		bf := make([]bfloat16.BFloat16, len(f))
		for i, x := range f {
			bf[i] = bfloat16.FromFloat32(x)
		}
		return tensors.FromFlatDataAndDimensions(bf, shape...)
	}
	return tensors.FromFlatDataAndDimensions(f, shape...)
}

// Merge folds the adapter into the base weights of ctx (float32), as PEFT's merge_and_unload:
// W ← W + s·B·A for every adapted layer (the product summed in float64, rounded once), and a
// modules_to_save tensor takes its trained copy's value; then the adapter is removed from ctx,
// so that ctx holds a plain model.
func (a *Adapter) Merge(ctx *context.Context) error {
	s := a.Config.Scaling()
	for _, m := range a.mods {
		w := ctx.GetVariableByScopeAndName(m.scope, "weight")
		A := ctx.GetVariableByScopeAndName(LoRAScope+m.scope+"/lora_A", "weight")
		B := ctx.GetVariableByScopeAndName(LoRAScope+m.scope+"/lora_B", "weight")
		if w == nil || A == nil || B == nil {
			return fmt.Errorf("lora merge: %s: missing weight or adapter", m.path)
		}
		if w.DType() != dtypes.Float32 {
			return fmt.Errorf("lora merge: %s is %s, want float32", m.path, w.DType())
		}
		wv, av, bv := tensors.MustCopyFlatData[float32](w.MustValue()), tensors.MustCopyFlatData[float32](A.MustValue()),
			tensors.MustCopyFlatData[float32](B.MustValue())
		r := a.Config.R
		for o := range m.out {
			for i := range m.in {
				var d float64
				for k := range r {
					d += float64(bv[o*r+k]) * float64(av[k*m.in+i])
				}
				wv[o*m.in+i] = float32(float64(wv[o*m.in+i]) + s*d)
			}
		}
		if err := w.SetValue(tensors.FromFlatDataAndDimensions(wv, m.out, m.in)); err != nil {
			return err
		}
	}
	for _, name := range a.saved {
		scope, vn := decoder.VarScope(name)
		c, base := ctx.GetVariableByScopeAndName(SavedScope+scope, vn), ctx.GetVariableByScopeAndName(scope, vn)
		if c == nil || base == nil {
			return fmt.Errorf("lora merge: %s: missing weight or its trained copy", name)
		}
		val, err := c.MustValue().LocalClone()
		if err != nil {
			return err
		}
		if err := base.SetValue(val); err != nil {
			return err
		}
	}
	decoder.SetAdapter(ctx, nil)
	return nil
}
