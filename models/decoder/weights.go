package decoder

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/safetensors"
)

// VarScope maps an HF tensor name to its GoMLX variable scope and name:
// "model.norm.weight" → ("/model/norm", "weight").
func VarScope(hfName string) (scope, name string) {
	i := strings.LastIndexByte(hfName, '.')
	return "/" + strings.ReplaceAll(hfName[:i], ".", "/"), hfName[i+1:]
}

// HFName is the inverse of VarScope.
func HFName(scope, name string) string {
	return strings.ReplaceAll(strings.TrimPrefix(scope, "/"), "/", ".") + "." + name
}

// ParseDType parses a --compute-dtype value: "float32" (default when empty) or "bfloat16".
func ParseDType(s string) (dtypes.DType, error) {
	switch strings.ToLower(s) {
	case "", "float32", "f32", "fp32":
		return dtypes.Float32, nil
	case "bfloat16", "bf16":
		return dtypes.BFloat16, nil
	}
	return dtypes.InvalidDType, fmt.Errorf("compute dtype %q is not supported; valid: float32, bfloat16", s)
}

// LoadWeights reads the safetensors weights of the checkpoint in dir (model.safetensors or a
// sharded index) into ctx as variables of the given dtype (float32 or bfloat16; F16 and BF16
// stored weights are converted as needed). Missing, unexpected or wrong-shape tensors are errors.
func LoadWeights(ctx *context.Context, cfg *Config, dir string, dtype dtypes.DType) error {
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.errName(), err)
	}
	return SetWeights(ctx, cfg, stored, dtype, weightsFile(dir))
}

// weightsFile names where a checkpoint's tensors are, for error messages.
func weightsFile(dir string) string {
	single := filepath.Join(dir, safetensors.SingleFileName)
	if _, err := os.Stat(single); err == nil {
		return single
	}
	return filepath.Join(dir, safetensors.IndexFileName)
}

// ignoredTensor reports tensors that HF checkpoints may carry but the model does not use: the
// rotary inverse frequencies (recomputed) and a tied head's copy of the embeddings.
func ignoredTensor(cfg *Config, name string) bool {
	return strings.HasSuffix(name, ".rotary_emb.inv_freq") || (cfg.TieWordEmbeddings && name == "lm_head.weight")
}

// SetWeights creates (or overwrites) the variables of ctx from stored tensors keyed by HF name;
// source names their file in errors.
func SetWeights(ctx *context.Context, cfg *Config, stored map[string]*safetensors.Tensor, dtype dtypes.DType, source string) error {
	// float64 is not a compute dtype a user picks (ParseDType); it is loaded for reference
	// computations: the float64 side of the numerics tests (docs/numerics.md).
	if dtype != dtypes.Float32 && dtype != dtypes.BFloat16 && dtype != dtypes.Float64 {
		return fmt.Errorf("%s: compute dtype %s is not supported; valid: float32, bfloat16", cfg.errName(), dtype)
	}
	specs := cfg.Tensors()
	known := map[string]bool{}
	for _, s := range specs {
		known[s.Name] = true
	}
	var unexpected []string
	for name := range stored {
		if !known[name] && !ignoredTensor(cfg, name) {
			unexpected = append(unexpected, name)
		}
	}
	if len(unexpected) > 0 {
		slices.Sort(unexpected)
		return fmt.Errorf("%s %s: unexpected tensors %q (not in a %d-layer %s with tie_word_embeddings=%v)",
			cfg.errName(), source, unexpected, cfg.NumHiddenLayers, strings.TrimSuffix(cfg.Family().Architecture, "ForCausalLM"), cfg.TieWordEmbeddings)
	}
	for _, s := range specs {
		st := stored[s.Name]
		if st == nil {
			return fmt.Errorf("%s %s: tensor %q is missing", cfg.errName(), source, s.Name)
		}
		if !slices.Equal(st.Shape, s.Shape) {
			return fmt.Errorf("%s %s: tensor %q has shape %v, config.json implies %v", cfg.errName(), source, s.Name, st.Shape, s.Shape)
		}
		t, err := toTensor(st, dtype)
		if err != nil {
			return fmt.Errorf("%s %s: tensor %q: %w", cfg.errName(), source, s.Name, err)
		}
		if err := setVariable(ctx, s.Name, t); err != nil {
			return fmt.Errorf("%s %s: tensor %q: %w", cfg.errName(), source, s.Name, err)
		}
	}
	return nil
}

// toTensor converts a stored tensor to a GoMLX tensor of dtype; BF16 → bfloat16 keeps the bits,
// and float32 values are decoded straight into the tensor (no intermediate copy of the weights:
// at Qwen2.5-0.5B's size that was 2 GB and a quarter of `generate`'s start-up).
func toTensor(st *safetensors.Tensor, dtype dtypes.DType) (*tensors.Tensor, error) {
	if dtype == dtypes.BFloat16 && st.DType == "BF16" {
		t := tensors.FromShape(shapes.Make(dtype, st.Shape...))
		err := t.MutableBytes(func(b []byte) { copy(b, st.Data) })
		return t, err
	}
	if dtype == dtypes.Float32 {
		t := tensors.FromShape(shapes.Make(dtype, st.Shape...))
		var derr error
		if err := tensors.MutableFlatData(t, func(f []float32) { derr = st.DecodeFloat32s(f) }); err != nil {
			return nil, err
		}
		return t, derr
	}
	f32, err := st.Float32s()
	if err != nil {
		return nil, err
	}
	return fromFloat32s(f32, st.Shape, dtype), nil
}

func fromFloat32s(f32 []float32, shape []int, dtype dtypes.DType) *tensors.Tensor {
	if dtype == dtypes.Float32 {
		return tensors.FromFlatDataAndDimensions(f32, shape...)
	}
	if dtype == dtypes.Float64 {
		f64 := make([]float64, len(f32))
		for i, x := range f32 {
			f64[i] = float64(x)
		}
		return tensors.FromFlatDataAndDimensions(f64, shape...)
	}
	bf := make([]bfloat16.BFloat16, len(f32))
	for i, x := range f32 {
		bf[i] = bfloat16.FromFloat32(x)
	}
	return tensors.FromFlatDataAndDimensions(bf, shape...)
}

func setVariable(ctx *context.Context, hfName string, t *tensors.Tensor) error {
	scope, name := VarScope(hfName)
	if v := ctx.GetVariableByScopeAndName(scope, name); v != nil {
		return v.SetValue(t)
	}
	_ = ctx.InAbsPath(scope).Checked(false).VariableWithValue(name, t)
	return nil
}

// InitWeights creates the variables of a randomly initialised model as HF's Qwen2 (Qwen3, Llama)
// does: linear and embedding weights ~ N(0, initializer_range²), biases 0, norm weights 1. The
// draws are made in float32 from seed (then converted to dtype), so they are reproducible.
func InitWeights(ctx *context.Context, cfg *Config, seed uint64, dtype dtypes.DType) error {
	if dtype != dtypes.Float32 && dtype != dtypes.BFloat16 {
		return fmt.Errorf("%s: compute dtype %s is not supported; valid: float32, bfloat16", cfg.errName(), dtype)
	}
	return drawInit(cfg, seed, func(s TensorSpec, data []float32) error {
		if err := setVariable(ctx, s.Name, fromFloat32s(data, s.Shape, dtype)); err != nil {
			return fmt.Errorf("%s init: tensor %q: %w", cfg.errName(), s.Name, err)
		}
		return nil
	})
}

// ExportWeights returns the model's variables as safetensors tensors with HF names, in HF order,
// stored as dtype ("F32", "BF16" or "F16").
func ExportWeights(ctx *context.Context, cfg *Config, dtype string) ([]*safetensors.Tensor, error) {
	if dtype != "F32" && dtype != "BF16" && dtype != "F16" {
		return nil, fmt.Errorf("%s export: dtype %q is not supported; valid: F32, BF16, F16", cfg.errName(), dtype)
	}
	var out []*safetensors.Tensor
	for _, s := range cfg.Tensors() {
		scope, name := VarScope(s.Name)
		v := ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			return nil, fmt.Errorf("%s export: no variable for tensor %q", cfg.errName(), s.Name)
		}
		value, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("%s export: tensor %q: %w", cfg.errName(), s.Name, err)
		}
		f32, err := Float32s(value)
		if err != nil {
			return nil, fmt.Errorf("%s export: tensor %q: %w", cfg.errName(), s.Name, err)
		}
		out = append(out, safetensors.FromFloat32s(s.Name, s.Shape, f32, dtype))
	}
	return out, nil
}

// Float32s copies a float32, bfloat16 or float64 tensor's values as float32s.
func Float32s(t *tensors.Tensor) ([]float32, error) {
	switch t.DType() {
	case dtypes.Float32:
		return tensors.CopyFlatData[float32](t)
	case dtypes.BFloat16:
		bf, err := tensors.CopyFlatData[bfloat16.BFloat16](t)
		out := make([]float32, len(bf))
		for i, x := range bf {
			out[i] = x.Float32()
		}
		return out, err
	case dtypes.Float64:
		f64, err := tensors.CopyFlatData[float64](t)
		out := make([]float32, len(f64))
		for i, x := range f64 {
			out[i] = float32(x)
		}
		return out, err
	}
	return nil, fmt.Errorf("dtype %s is not a float type", t.DType())
}

// Float64s copies a float tensor's values as float64s.
func Float64s(t *tensors.Tensor) ([]float64, error) {
	if t.DType() == dtypes.Float64 {
		return tensors.CopyFlatData[float64](t)
	}
	f32, err := Float32s(t)
	out := make([]float64, len(f32))
	for i, x := range f32 {
		out[i] = float64(x)
	}
	return out, err
}

// Load reads a checkpoint directory's config.json and weights into a new context, the weights
// as dtype (float32 or bfloat16).
func Load(dir string, dtype dtypes.DType) (*context.Context, *Config, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, nil, err
	}
	ctx := context.New()
	if err := LoadWeights(ctx, cfg, dir, dtype); err != nil {
		return nil, nil, err
	}
	return ctx, cfg, nil
}
