package trainable

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/safetensors"
)

// The two-model trainable set: PPO trains its policy and its value model with one AdamW (TRL's
// PolicyAndValueWrapper, one optimizer over both models' parameters, one clip_grad_norm_ over
// both). The value model's variables move into the policy's context under ValueScope, so the one
// compiled micro-batch graph differentiates both and the one update graph clips and steps both;
// the value model's forward pass runs on ctx.InAbsPath(ValueScope) (qwen2 reads its variables
// relative to the context it is given).
const (
	// ValueScope is the scope of the value model's variables in the policy's context (its masters
	// under bf16 at MasterScope+ValueScope+..., its AdamW state beside the policy's).
	ValueScope = "/value_model"
	// ValueDir is the subdirectory of a checkpoint (and of the final output) holding the value
	// model as a HF *ForSequenceClassification checkpoint.
	ValueDir = "value_model"
	// valueName prefixes the value model's HF names in the optimizer state.
	valueName = "value_model."
)

// AttachValue makes v (a float32 classifier with one label, LoadClassifier) the value model
// trained with m: its weights move into m's context under ValueScope (bf16 copies and float32
// masters when m computes in bf16), and v reads them there from then on.
func (m *Model) AttachValue(v *Model) error {
	switch {
	case m.Value != nil:
		return errors.New("model: a value model is already attached")
	case m.Adapter != nil:
		return errors.New("model: a value model cannot be trained beside a LoRA adapter")
	case v.DType != dtypes.Float32 || v.Prefix != "":
		return errors.New("model: attach a float32 value model of its own")
	case v.Config.NumLabels != 1:
		return fmt.Errorf("value model %s: want a classifier with num_labels 1, got %d", v.Dir, v.Config.NumLabels)
	}
	vars, names, err := v.Params()
	if err != nil {
		return err
	}
	for i, x := range vars {
		t, err := x.Value()
		if err != nil {
			return fmt.Errorf("value model: %s: %w", names[i], err)
		}
		m.Ctx.InAbsPath(ValueScope+x.Scope()).Checked(false).VariableWithValue(x.Name(), t)
	}
	v.Ctx, v.Prefix = m.Ctx, ValueScope
	m.Value = v
	if m.DType == dtypes.BFloat16 {
		return v.ToBF16()
	}
	return nil
}

// withValue is Trainable with a value model: the policy's weights, then the value model's named
// "value_model." + HF name.
func (m *Model) withValue() ([]*context.Variable, []string, error) {
	vars, names, err := m.Params()
	if err != nil {
		return nil, nil, err
	}
	vv, vn, err := m.Value.Params()
	if err != nil {
		return nil, nil, err
	}
	for i, n := range vn {
		vars, names = append(vars, vv[i]), append(names, valueName+n)
	}
	return vars, names, nil
}

// saveValue writes the value model, if any, into dir/ValueDir.
func (m *Model) saveValue(dir string) error {
	if m.Value == nil {
		return nil
	}
	sub := filepath.Join(dir, ValueDir)
	if err := os.MkdirAll(sub, 0o755); err != nil {
		return err
	}
	if err := m.Value.Save(sub); err != nil {
		return fmt.Errorf("value model: %w", err)
	}
	return nil
}

// ResumeValue restores the value model's weights, if any, from a checkpoint's ValueDir.
func (m *Model) ResumeValue(dir string) error {
	if m.Value == nil {
		return nil
	}
	sub := filepath.Join(dir, ValueDir)
	weights, err := safetensors.ReadModelDir(sub)
	if err != nil {
		return fmt.Errorf("value model: %w", err)
	}
	byName, err := Float32Tensors(weights, "")
	if err != nil {
		return fmt.Errorf("value model %s: %w", sub, err)
	}
	if err := m.Value.SetWeights(byName); err != nil {
		return fmt.Errorf("value model %s: %w", sub, err)
	}
	return nil
}

// CloneWeights copies the causal LM's weights of ctx (the variables under /model and /lm_head, in
// their compute dtype) into a new context, not trainable: a frozen reference policy (GRPO's with
// beta ≠ 0, PPO's). A value model's variables (under ValueScope) and the optimizer's are left out.
func CloneWeights(ctx *context.Context) (*context.Context, error) {
	ref := context.New()
	n := 0
	for v := range ctx.IterVariables() {
		scope := v.Scope()
		if !(underScope(scope, "/model") || underScope(scope, "/lm_head")) {
			continue
		}
		val, err := v.Value()
		if err != nil {
			return nil, fmt.Errorf("reference weights: %s/%s: %w", scope, v.Name(), err)
		}
		c, err := val.LocalClone()
		if err != nil {
			return nil, fmt.Errorf("reference weights: %s/%s: %w", scope, v.Name(), err)
		}
		ref.InAbsPath(scope).Checked(false).VariableWithValue(v.Name(), c).SetTrainable(false)
		n++
	}
	if n == 0 {
		return nil, errors.New("reference weights: the model context has no /model variables")
	}
	return ref, nil
}

func underScope(scope, p string) bool {
	return scope == p || strings.HasPrefix(scope, p+"/")
}

// Float32Tensors converts stored tensors (any float dtype) to float32 GoMLX tensors by name.
func Float32Tensors(stored map[string]*safetensors.Tensor, prefix string) (map[string]*tensors.Tensor, error) {
	out := make(map[string]*tensors.Tensor, len(stored))
	for name, st := range stored {
		f, err := st.Float32s()
		if err != nil {
			return nil, err
		}
		out[prefix+name] = tensors.FromFlatDataAndDimensions(f, st.Shape...)
	}
	return out, nil
}
