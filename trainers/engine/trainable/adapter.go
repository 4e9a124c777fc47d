package trainable

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// LoadModelPEFT is LoadModel with a new LoRA adapter attached (--use-peft): A drawn from seed, B
// zero, so the model starts equal to the base; bf16 keeps the frozen base weights in bfloat16
// without float32 masters (the adapter stays float32, as PEFT's autocast_adapter_dtype).
func LoadModelPEFT(dir string, bf16 bool, c lora.Config, seed uint64) (*Model, error) {
	m, err := LoadModel(dir, false)
	if err != nil {
		return nil, err
	}
	if err := m.AttachAdapter(c, seed); err != nil {
		return nil, err
	}
	if bf16 {
		if err := m.ToBF16(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// LoadModelAdapter is LoadModel with the PEFT LoRA adapter of adapterDir (adapter_config.json,
// adapter_model.safetensors) attached. An adapter that does not fit the base (a target module
// the model has not, a tensor of another shape, a missing or unexpected tensor) is an error
// naming it.
func LoadModelAdapter(dir string, bf16 bool, adapterDir string) (*Model, error) {
	m, err := LoadModel(dir, false)
	if err != nil {
		return nil, err
	}
	if m.Adapter, err = lora.Load(m.Ctx, m.Config, adapterDir); err != nil {
		return nil, err
	}
	if bf16 {
		if err := m.ToBF16(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// AttachAdapter adds a new LoRA adapter to a float32 model (lora.Adapter.Attach).
func (m *Model) AttachAdapter(c lora.Config, seed uint64) error {
	if m.DType != dtypes.Float32 {
		return fmt.Errorf("model: attach the adapter before switching to bf16")
	}
	if m.Adapter != nil {
		return fmt.Errorf("model: an adapter is already attached")
	}
	a, err := lora.New(m.Config, c)
	if err != nil {
		return err
	}
	if err := a.Attach(m.Ctx, seed); err != nil {
		return err
	}
	m.Adapter = a
	return nil
}

// Trainable returns the variables the optimizer updates and their names (the optimizer state's
// keys): the base weights at their HF names, or, with an adapter, only the adapter's (PEFT names).
func (m *Model) Trainable() ([]*context.Variable, []string, error) {
	if m.Value != nil {
		return m.withValue()
	}
	if m.Adapter == nil {
		return m.Params()
	}
	return m.Adapter.Vars(m.Ctx)
}

// adapterToBF16 is ToBF16 with an adapter: the frozen base weights become bfloat16 in place (no
// masters: nothing updates them), the modules_to_save copies get float32 masters like a fully
// trained weight, and LoRA's A and B stay float32.
func (m *Model) adapterToBF16() error {
	base, _, err := m.Params()
	if err != nil {
		return err
	}
	trained, _, err := m.Adapter.Vars(m.Ctx)
	if err != nil {
		return err
	}
	for _, v := range append(base, trained...) {
		if v.DType() != dtypes.Float32 || (strings.HasPrefix(v.Scope(), lora.LoRAScope+"/")) {
			continue
		}
		f32, err := v.Value()
		if err != nil {
			return err
		}
		if strings.HasPrefix(v.Scope(), lora.SavedScope+"/") {
			m.Ctx.InAbsPath(MasterScope+v.Scope()).Checked(false).VariableWithValue(v.Name(), f32).SetTrainable(false)
		}
		if err := v.SetValuePreservingOld(toBF16(f32)); err != nil {
			return err
		}
	}
	m.DType = dtypes.BFloat16
	return nil
}

// SetAdapterWeights sets the adapter's variables (masters under bf16, and their compute copies)
// from stored tensors keyed by PEFT name (adapter_model.safetensors; source names it in errors).
// A missing, unexpected or wrong-shape tensor is an error naming it.
func (m *Model) SetAdapterWeights(stored map[string]*safetensors.Tensor, source string) error {
	vars, names, err := m.Trainable()
	if err != nil {
		return err
	}
	for _, name := range sortedNames(stored) {
		if !slices.Contains(names, name) {
			return fmt.Errorf("%s: tensor %s is not a tensor of this adapter on the %s model (its modules: %s)", source, name, m.Config.ModelType, strings.Join(m.Adapter.Modules(), ", "))
		}
	}
	for i, v := range vars {
		f, err := safetensors.Float32sShaped(stored, names[i], v.Shape().Dimensions)
		if err != nil {
			return fmt.Errorf("%s: %w (the model's layer)", source, err)
		}
		t := tensors.FromFlatDataAndDimensions(f, v.Shape().Dimensions...)
		master := m.Master(v)
		if master == nil {
			return fmt.Errorf("model: %s has no float32 master", names[i])
		}
		if err := master.SetValue(t); err != nil {
			return err
		}
		if master != v {
			if err := v.SetValue(toBF16(t)); err != nil {
				return err
			}
		}
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// adapterTensors returns the adapter's float32 weights (the masters) by PEFT name, in Vars order.
func (m *Model) adapterTensors() ([]*safetensors.Tensor, error) {
	vars, names, err := m.Trainable()
	if err != nil {
		return nil, err
	}
	out := make([]*safetensors.Tensor, len(vars))
	for i, v := range vars {
		t, err := m.Master(v).Value()
		if err != nil {
			return nil, err
		}
		f, err := decoder.Float32s(t)
		if err != nil {
			return nil, err
		}
		out[i] = safetensors.FromFloat32s(names[i], t.Shape().Dimensions, f, "F32")
	}
	return out, nil
}

// saveAdapter is Save with an adapter, as PEFT's save_pretrained and TRL's trainer save it:
// adapter_config.json, adapter_model.safetensors (float32) and the tokenizer files (with the
// run's text changes), not the base weights.
func (m *Model) saveAdapter(dir string) error {
	weights, err := m.adapterTensors()
	if err != nil {
		return err
	}
	if err := m.Adapter.WriteFiles(dir, weights); err != nil {
		return err
	}
	if m.Dir == "" {
		return nil
	}
	if err := decoder.CopyTokenizer(dir, m.Dir); err != nil {
		return err
	}
	if m.Text == nil {
		return nil
	}
	return m.Text.SaveChanges(dir)
}

// LoadForTraining loads the checkpoint in dir for a run of cfg: LoadModel, or with use_peft
// (--use-peft) LoadModelPEFT with cfg's LoRA options (A drawn from the run's seed; without
// dropout when config.DisableDropout says so: TRL's disable_dropout). Target modules the model
// has not are an error naming the flag.
func LoadForTraining(dir string, cfg config.Config) (*Model, error) {
	c := cfg.Common()
	p := config.PEFTOptions(cfg)
	if p == nil || !p.UsePEFT {
		return LoadModel(dir, c.BF16)
	}
	lc := lora.Config{R: p.LoraR, Alpha: float64(p.LoraAlpha), Dropout: p.LoraDropout, TargetModules: p.LoraTargetModules,
		UseRSLoRA: p.UseRSLoRA, ModulesToSave: p.LoraModulesToSave, BaseModel: c.Model}
	m, err := LoadModelPEFT(dir, c.BF16, lc, uint64(c.Seed))
	if err != nil {
		for prefix, flag := range map[string]string{"target_modules: ": "lora_target_modules (--lora-target-modules): ",
			"modules_to_save: ": "lora_modules_to_save (--lora-modules-to-save): "} {
			if rest, ok := strings.CutPrefix(err.Error(), prefix); ok {
				return nil, fmt.Errorf("model %s: %s%s", dir, flag, rest)
			}
		}
		return nil, err
	}
	m.Adapter.NoDropout = config.DisableDropout(cfg)
	return m, nil
}
