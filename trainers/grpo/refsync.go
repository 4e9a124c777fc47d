package grpo

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// ReferenceName is the checkpoint file that holds the reference weights (float32, HF names) of a
// sync_ref_model run once they have moved away from the starting weights.
const ReferenceName = "reference.safetensors"

// newSyncedReference is the reference policy of a sync_ref_model run: a model of its own holding
// the starting weights in float32 and, under bf16, their bfloat16 copies (trainable.Model's layout),
// so that the mixing runs on float32 weights as TRL's does on the model's parameters, and the
// scorer reads the compute-dtype copies like the policy's.
func newSyncedReference(m *trainable.Model) (*trainable.Model, error) {
	vars, names, err := m.Params()
	if err != nil {
		return nil, fmt.Errorf("grpo: reference weights: %w", err)
	}
	ctx := context.New()
	for i, v := range vars {
		val, err := m.Master(v).Value()
		if err != nil {
			return nil, fmt.Errorf("grpo: reference weights: %s: %w", names[i], err)
		}
		c, err := val.LocalClone()
		if err != nil {
			return nil, fmt.Errorf("grpo: reference weights: %s: %w", names[i], err)
		}
		ctx.InAbsPath(v.Scope()).Checked(false).VariableWithValue(v.Name(), c).SetTrainable(false)
	}
	ref := &trainable.Model{Config: m.Config, Ctx: ctx, DType: dtypes.Float32}
	if m.DType == dtypes.BFloat16 {
		if err := ref.ToBF16(); err != nil {
			return nil, fmt.Errorf("grpo: reference weights: %w", err)
		}
	}
	return ref, nil
}

// MixReference is TRL's SyncRefModelCallback._sync_target_model on one float32 parameter,
// target.mul_(1 − α).add_(param, alpha=α), i.e. ref ← α·policy + (1 − α)·ref element by
// element: first t = fl(ref · fl(1 − α)), then fl(α)·policy + t rounded once, as torch's add
// with alpha does (a fused multiply-add: CUDA contracts it, the CPU kernel calls vec::fmadd).
func MixReference(ref, policy []float32, alpha float64) {
	a, b := float32(alpha), float32(1-alpha)
	for i, p := range policy {
		ref[i] = fma32(a, p, float32(ref[i]*b))
	}
}

// fma32 is a·b + c rounded once to float32. The float64 product of two float32s is exact; the
// float64 sum is made round-to-odd (its error from TwoSum decides the last bit), after which the
// rounding to float32 is correct (Boldo & Melquiond, "Emulation of FMA and correctly rounded
// sums: proved algorithms using rounding to odd", 2008: 53 ≥ 24 + 2 bits).
func fma32(a, b, c float32) float32 {
	p, q := float64(a)*float64(b), float64(c)
	s := p + q
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	bb := s - p
	e := (p - (s - bb)) + (q - bb) // p + q − s exactly
	if bits := math.Float64bits(s); e != 0 && bits&1 == 0 {
		if (e > 0) == (s > 0) {
			bits++ // the odd neighbour away from zero
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// syncReference mixes the policy's float32 weights (the masters under bf16) into the reference,
// parameter by parameter (MixReference), and refreshes the reference's bfloat16 copies.
func (t *Trainer) syncReference() error {
	pol, names, err := t.s.Model.Params()
	if err != nil {
		return err
	}
	ref, _, err := t.ref.Params()
	if err != nil {
		return err
	}
	for i, v := range pol {
		p, err := float32s(t.s.Model.Master(v))
		if err != nil {
			return fmt.Errorf("grpo: sync reference: %s: %w", names[i], err)
		}
		r, err := float32s(t.ref.Master(ref[i]))
		if err != nil {
			return fmt.Errorf("grpo: sync reference: %s: %w", names[i], err)
		}
		MixReference(r, p, t.cfg.RefModelMixupAlpha)
		if err := t.setReference(ref[i], r); err != nil {
			return fmt.Errorf("grpo: sync reference: %s: %w", names[i], err)
		}
	}
	t.log.Info("grpo: synced the reference model", "step", t.globalStep, "alpha", t.cfg.RefModelMixupAlpha)
	return nil
}

func float32s(v *context.Variable) ([]float32, error) {
	val, err := v.Value()
	if err != nil {
		return nil, err
	}
	return decoder.Float32s(val)
}

// setReference sets a reference weight (its master under bf16, and the bfloat16 copy) to w.
func (t *Trainer) setReference(v *context.Variable, w []float32) error {
	dims := v.Shape().Dimensions
	if err := t.ref.Master(v).SetValue(tensors.FromFlatDataAndDimensions(w, dims...)); err != nil {
		return err
	}
	if t.ref.DType != dtypes.BFloat16 {
		return nil
	}
	bf := make([]bfloat16.BFloat16, len(w))
	for i, x := range w {
		bf[i] = bfloat16.FromFloat32(x)
	}
	return v.SetValue(tensors.FromFlatDataAndDimensions(bf, dims...))
}

// writeReference writes the reference's float32 weights by HF name (ReferenceName).
func (t *Trainer) writeReference(path string) error {
	vars, names, err := t.ref.Params()
	if err != nil {
		return err
	}
	out := make([]*safetensors.Tensor, len(vars))
	for i, v := range vars {
		w, err := float32s(t.ref.Master(v))
		if err != nil {
			return fmt.Errorf("%s: %w", names[i], err)
		}
		out[i] = safetensors.FromFloat32s(names[i], v.Shape().Dimensions, w, "F32")
	}
	return safetensors.WriteFile(path, out, map[string]string{"format": "pt"})
}

// readReference restores the reference weights from a checkpoint's ReferenceName. Before the
// first sync (step < ref_model_sync_steps) the reference is the starting weights and the file is
// absent; after it, a missing file is an error, since the run could not continue as it would have.
func (t *Trainer) readReference(dir string, step int) error {
	path := filepath.Join(dir, ReferenceName)
	stored, _, err := safetensors.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if step < t.cfg.RefModelSyncSteps {
			return nil
		}
		return fmt.Errorf("%s is missing: a sync_ref_model run at step %d (ref_model_sync_steps %d) needs its mixed reference weights",
			path, step, t.cfg.RefModelSyncSteps)
	}
	if err != nil {
		return err
	}
	vars, names, err := t.ref.Params()
	if err != nil {
		return err
	}
	for i, v := range vars {
		w, err := safetensors.Float32sShaped(stored, names[i], v.Shape().Dimensions)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := t.setReference(v, w); err != nil {
			return fmt.Errorf("%s: %s: %w", path, names[i], err)
		}
	}
	return nil
}
