package step

import (
	"fmt"
	"math"
	"strings"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
)

// Scopes of the optimizer's state, beside the weights in the same context (a weight at scope S
// has its first moment at ExpAvgScope+S, with the weight's name).
const (
	GradScope     = "/posttrain/grad"       // gradients summed over the micro-batches of a step (loop.Optimizer)
	ExpAvgScope   = "/posttrain/exp_avg"    // AdamW first moment (PyTorch's exp_avg)
	ExpAvgSqScope = "/posttrain/exp_avg_sq" // AdamW second moment (exp_avg_sq)
)

// Scalars are one update's host-side scalars, computed in float64 from the learning rate and the
// update's number t (1, 2, ...) and fed to the update graph, so that a learning-rate schedule
// never recompiles it.
type Scalars[T any] struct {
	StepSize    T // Plain: lr; AdamW: lr/(1−β1ᵗ)
	BC2Sqrt     T // AdamW: √(1−β2ᵗ); Plain: 1 (unused)
	DecayFactor T // AdamW: 1 − lr·wd; Plain: 1 (unused)
}

// AdamHyper are torch.optim.AdamW's hyper-parameters (HF Trainer's default optimizer); zero
// Beta1, Beta2 and Epsilon are not defaults here: the caller resolves them (Config.hyper).
// WeightDecay 0 is Adam.
type AdamHyper struct {
	Beta1, Beta2, Epsilon, WeightDecay float64
}

// UpdateScalars returns the Scalars of update t (1-based) at learning rate lr for opt.
func UpdateScalars(opt Optimizer, hp AdamHyper, lr float64, t int) Scalars[float64] {
	if opt == Plain {
		return Scalars[float64]{StepSize: lr, BC2Sqrt: 1, DecayFactor: 1}
	}
	ft := float64(t)
	return Scalars[float64]{StepSize: lr / (1 - math.Pow(hp.Beta1, ft)), BC2Sqrt: math.Sqrt(1 - math.Pow(hp.Beta2, ft)),
		DecayFactor: 1 - lr*hp.WeightDecay}
}

// SGDUpdate is the course's plain gradient step θ ← θ − lr·g, in g's dtype (lr = s.StepSize).
func SGDUpdate(theta, grad *Node, s Scalars[*Node]) *Node {
	return Sub(theta, Mul(grad, ConvertDType(s.StepSize, grad.DType())))
}

// AdamWUpdate is PyTorch's AdamW step (torch/optim/adamw.py, single-tensor path) on one
// parameter θ with gradient g (already clipped) and moments m, v:
//
//	θ ← θ·(1 − lr·wd)                        (decoupled weight decay, when decay)
//	m ← β1·m + (1−β1)·g,  v ← β2·v + (1−β2)·g²
//	θ ← θ − (lr/(1−β1ᵗ))·m / (√v/√(1−β2ᵗ) + ε)
//
// s carries lr/(1−β1ᵗ), √(1−β2ᵗ) and 1 − lr·wd (UpdateScalars) in θ's dtype. It returns the new
// θ, m and v; the caller stores them.
func AdamWUpdate(theta, grad, m, v *Node, s Scalars[*Node], hp AdamHyper, decay bool) (newTheta, newM, newV *Node) {
	if decay && hp.WeightDecay > 0 {
		theta = Mul(theta, s.DecayFactor)
	}
	b1, b2 := hp.Beta1, hp.Beta2
	m = Add(MulScalar(m, b1), MulScalar(grad, 1-b1))
	v = Add(MulScalar(v, b2), MulScalar(Square(grad), 1-b2))
	denom := AddScalar(Div(Sqrt(v), s.BC2Sqrt), hp.Epsilon)
	return Sub(theta, Mul(s.StepSize, Div(m, denom))), m, v
}

// Decays reports whether weight decay applies to the weight of HF name name: HF Trainer's
// get_decay_parameter_names leaves out biases and norm weights.
func Decays(name string) bool {
	return !strings.HasSuffix(name, ".bias") && !strings.Contains(name, "norm")
}

// Catch runs fn and turns a GoMLX panic (graph building and execution panic) into an error
// prefixed with what; an error fn returns gets the same prefix.
func Catch(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = fmt.Errorf("%s: %w", what, e)
			} else {
				err = fmt.Errorf("%s: %v", what, r)
			}
		}
	}()
	if e := fn(); e != nil {
		return fmt.Errorf("%s: %w", what, e)
	}
	return nil
}
