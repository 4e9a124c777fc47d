package trainable

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/lora"
)

// Model is a checkpoint of a supported family (decoder.Families) loaded for training: its weights
// as variables of Ctx at the HF scopes (decoder.VarScope), in the compute dtype, plus its text side
// (models/encode: tokenizer, chat template, EOS), which Save writes back with the weights.
//
// Under bf16 the variables at the HF scopes hold bfloat16 copies that the forward and backward
// passes read, and the float32 master weights live at MasterScope+scope; the optimizer updates
// the masters (and its float32 state) and rewrites the bfloat16 copies from them after each step.
type Model struct {
	Dir    string // the checkpoint directory the weights were read from
	Config *decoder.Config
	Ctx    *context.Context
	DType  dtypes.DType // compute dtype: Float32, or BFloat16 with float32 masters
	// Text is the checkpoint's tokenizer and chat template, with the run's replacements (SFT's
	// eos_token and chat_template_path); nil for a model built by hand (tests, benchmarks), which
	// Save writes with the source's tokenizer files unchanged.
	Text *encode.Text
	// Adapter, when set, is the LoRA adapter being trained (--use-peft): only its variables (and
	// its modules_to_save copies) are trainable, the base weights stay frozen in the compute dtype
	// without float32 masters, and Save writes PEFT's adapter files (adapter.go).
	Adapter *lora.Adapter
	// Value, when set, is a second model trained with this one in the same optimizer (PPO's value
	// model: TRL's PolicyAndValueWrapper under one AdamW and one global-norm clip): its variables
	// live in Ctx under ValueScope, Trainable includes them (named "value_model." + HF name), and
	// Save writes it into the ValueDir subdirectory (value.go).
	Value *Model
	// Prefix is the scope under which a companion model's (Value's) variables live in the owner's
	// context; "" for a model of its own.
	Prefix string
}

// MasterScope holds the float32 master weights under bf16.
const MasterScope = "/posttrain/master"

// LoadModel reads a checkpoint directory (config.json, safetensors weights, tokenizer.json,
// tokenizer_config.json) for training; bf16 selects bfloat16 compute with float32 masters.
func LoadModel(dir string, bf16 bool) (*Model, error) {
	ctx, cfg, err := decoder.Load(dir, dtypes.Float32)
	if err != nil {
		return nil, err
	}
	txt, err := encode.Load(dir, encode.Options{VocabSize: cfg.VocabSize})
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", dir, err)
	}
	m := &Model{Dir: dir, Config: cfg, Ctx: ctx, DType: dtypes.Float32, Text: txt}
	if bf16 {
		if err := m.ToBF16(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Params returns the model's weight variables (at the HF scopes) in HF order.
func (m *Model) Params() ([]*context.Variable, []string, error) {
	var vars []*context.Variable
	var names []string
	for _, s := range m.Config.Tensors() {
		scope, name := decoder.VarScope(s.Name)
		v := m.Ctx.GetVariableByScopeAndName(m.Prefix+scope, name)
		if v == nil {
			return nil, nil, fmt.Errorf("model: no variable for %s", s.Name)
		}
		vars, names = append(vars, v), append(names, s.Name)
	}
	return vars, names, nil
}

// Master returns the float32 master variable of a weight (the weight itself in float32 mode and
// for a float32 variable; nil for a frozen base weight under bf16 with an adapter).
func (m *Model) Master(v *context.Variable) *context.Variable {
	if m.DType == dtypes.Float32 || v.DType() == dtypes.Float32 { // LoRA's A and B are float32
		return v
	}
	return m.Ctx.GetVariableByScopeAndName(MasterScope+v.Scope(), v.Name())
}

// ToBF16 switches a float32 model to bf16 compute: every weight moves to its float32 master
// variable and a bfloat16 copy takes its place. A model already in bf16 is left as is.
func (m *Model) ToBF16() error {
	if m.DType == dtypes.BFloat16 {
		return nil
	}
	if m.Adapter != nil {
		return m.adapterToBF16()
	}
	vars, _, err := m.Params()
	if err != nil {
		return err
	}
	for _, v := range vars {
		f32, err := v.Value()
		if err != nil {
			return err
		}
		m.Ctx.InAbsPath(MasterScope+v.Scope()).Checked(false).VariableWithValue(v.Name(), f32).SetTrainable(false)
		if err := v.SetValuePreservingOld(toBF16(f32)); err != nil {
			return err
		}
	}
	m.DType = dtypes.BFloat16
	if m.Value != nil {
		return m.Value.ToBF16()
	}
	return nil
}

func toBF16(t *tensors.Tensor) *tensors.Tensor {
	f, _ := decoder.Float32s(t)
	bf := make([]bfloat16.BFloat16, len(f))
	for i, x := range f {
		bf[i] = bfloat16.FromFloat32(x)
	}
	return tensors.FromFlatDataAndDimensions(bf, t.Shape().Dimensions...)
}

// SetWeights overwrites the weights (masters under bf16, and their bfloat16 copies) with float32
// tensors keyed by HF name, e.g. read from a checkpoint's model.safetensors.
func (m *Model) SetWeights(byName map[string]*tensors.Tensor) error {
	vars, names, err := m.Params()
	if err != nil {
		return err
	}
	for i, v := range vars {
		t, ok := byName[names[i]]
		if !ok {
			return fmt.Errorf("model: weight %s is missing", names[i])
		}
		if !slices.Equal(t.Shape().Dimensions, v.Shape().Dimensions) {
			return fmt.Errorf("model: weight %s has shape %v, want %v", names[i], t.Shape().Dimensions, v.Shape().Dimensions)
		}
		if err := m.Master(v).SetValue(t); err != nil {
			return err
		}
		if m.DType == dtypes.BFloat16 {
			if err := v.SetValue(toBF16(t)); err != nil {
				return err
			}
		}
	}
	return nil
}

// masterContext returns a context holding the float32 weights at the HF scopes, for saving.
func (m *Model) masterContext() (*context.Context, error) {
	if m.DType == dtypes.Float32 && m.Prefix == "" {
		return m.Ctx, nil
	}
	vars, _, err := m.Params()
	if err != nil {
		return nil, err
	}
	out := context.New()
	for _, v := range vars {
		t, err := m.Master(v).Value()
		if err != nil {
			return nil, err
		}
		out.InAbsPath(strings.TrimPrefix(v.Scope(), m.Prefix)).Checked(false).VariableWithValue(v.Name(), t)
	}
	return out, nil
}

// Save writes the model (float32 weights) as a HF checkpoint into dir, which must exist: weights,
// config.json and generation_config.json derived from the source checkpoint, tokenizer files; the
// text side's changes (encode.Text.SaveChanges, and ConfigEOS's eos_token_id in config.json and
// generation_config.json).
func (m *Model) Save(dir string) error {
	if m.Adapter != nil {
		return m.saveAdapter(dir)
	}
	ctx, err := m.masterContext()
	if err != nil {
		return err
	}
	cfg, opts := m.Config, decoder.SaveOptions{DType: "F32", TokenizerPath: m.Dir, BaseDir: m.Dir}
	if m.Text != nil {
		if id, ok := m.Text.ConfigEOS(); ok {
			gen, err := decoder.ReadGenerationConfig(m.Dir)
			if err != nil {
				return err
			}
			if gen == nil {
				gen = &decoder.GenerationConfig{BOSTokenID: m.Config.BOSTokenID}
			}
			g := *gen
			g.EOSTokenIDs = []int{id}
			opts.Generation = &g
			c := *m.Config
			c.EOSTokenIDs = []int{id}
			cfg = &c
		}
	}
	if err := decoder.WriteModel(dir, ctx, cfg, opts); err != nil {
		return err
	}
	if err := m.saveValue(dir); err != nil {
		return err
	}
	if m.Text == nil {
		return nil
	}
	return m.Text.SaveChanges(dir)
}
