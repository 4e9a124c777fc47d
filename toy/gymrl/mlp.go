// Package gymrl is the course's two optional extras on Gymnasium's tasks (toy/gym): DQN
// (extras/dqn_cartpole.py, a shortened CleanRL dqn.py) and PPO (extras/ppo_cartpole.py, a
// shortened CleanRL ppo.py), with the extras' hyperparameters as defaults. The networks and their
// updates run in GoMLX (float32, as PyTorch), Adam through trainers/engine/step; the host-side RL math
// (GAE, sample std) is trainers/engine/rl's and so is the PPO clip (rl.ClippedSurrogate), shared
// with the corridor phases and the LLM trainers. PyTorch's random streams (torch.manual_seed) are
// replaced by Python's random.Random (internal/pyrand), so the numbers differ from the extras'
// printed ones digit for digit, while the environments are Gymnasium's exactly.
package gymrl

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/gomlxfix"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/toy/gym"
)

// mlp is nn.Sequential(nn.Linear(sizes[0], sizes[1]), act, …, nn.Linear(sizes[n-2], sizes[n-1])):
// the activation between layers, none after the last. Weights keep PyTorch's [out, in] layout.
type mlp struct {
	weights, biases []*context.Variable
	act             func(*Node) *Node
}

// newMLP creates the layers' variables under scope, initialised as nn.Linear's
// reset_parameters: kaiming_uniform_(a=√5) for the weight and the bias both give
// U(−1/√fan_in, 1/√fan_in), drawn here from r (weight then bias, layer by layer, as PyTorch).
// trainable false is a target network, updated only by copy.
// The DotGeneral gradient of stock GoMLX is slow (see internal/gomlxfix); install the fixes.
func init() { gomlxfix.Install() }

func newMLP(ctx *context.Context, scope string, sizes []int, act func(*Node) *Node, r *pyrand.Rand, trainable bool) *mlp {
	m := &mlp{act: act}
	for i := 0; i+1 < len(sizes); i++ {
		in, out := sizes[i], sizes[i+1]
		bound := 1 / math.Sqrt(float64(in))
		uniform := func(n int) []float32 {
			xs := make([]float32, n)
			for k := range xs {
				xs[k] = float32(-bound + 2*bound*r.Random()) // random.uniform(−b, b)
			}
			return xs
		}
		lctx := ctx.InAbsPath(fmt.Sprintf("%s/%d", scope, i)).Checked(false)
		w := lctx.VariableWithValue("weight", tensors.FromFlatDataAndDimensions(uniform(out*in), out, in)).SetTrainable(trainable)
		b := lctx.VariableWithValue("bias", tensors.FromFlatDataAndDimensions(uniform(out), out)).SetTrainable(trainable)
		m.weights, m.biases = append(m.weights, w), append(m.biases, b)
	}
	return m
}

// apply is the forward pass: x [B, in] → [B, out].
func (m *mlp) apply(x *Node) *Node {
	g := x.Graph()
	for i, w := range m.weights {
		x = DotGeneral(x, []int{1}, nil, w.ValueGraph(g), []int{1}, nil) // [B,in]·[out,in]ᵀ → [B,out]
		x = Add(x, ExpandLeftToRank(m.biases[i].ValueGraph(g), 2))
		if i+1 < len(m.weights) {
			x = m.act(x)
		}
	}
	return x
}

// copyFrom sets m's weights to src's (load_state_dict), on the host.
func (m *mlp) copyFrom(src *mlp) error {
	pairs := append(append([][2]*context.Variable{}, zip(m.weights, src.weights)...), zip(m.biases, src.biases)...)
	for _, p := range pairs {
		t, err := p[1].Value()
		if err != nil {
			return err
		}
		c := tensors.FromFlatDataAndDimensions(tensors.MustCopyFlatData[float32](t), t.Shape().Dimensions...)
		if err := p[0].SetValue(c); err != nil {
			return err
		}
	}
	return nil
}

func zip(a, b []*context.Variable) [][2]*context.Variable {
	out := make([][2]*context.Variable, len(a))
	for i := range a {
		out[i] = [2]*context.Variable{a[i], b[i]}
	}
	return out
}

// relu and tanh are the extras' activations.
func relu(x *Node) *Node { return Max(x, ZerosLike(x)) }
func tanh(x *Node) *Node { return Tanh(x) }

// obsTensor lays observations out as a float32 [B, n] tensor.
func obsTensor(obs [][]float32) *tensors.Tensor {
	n := len(obs[0])
	flat := make([]float32, 0, len(obs)*n)
	for _, o := range obs {
		flat = append(flat, o...)
	}
	return tensors.FromFlatDataAndDimensions(flat, len(obs), n)
}

// float32Dtype is the networks' dtype (PyTorch's default).
const float32Dtype = dtypes.Float32

// meanLast10 is the extras' sum(returns[-10:]) / len(returns[-10:]), summed left to right.
func meanLast10(returns []float64) float64 {
	last := returns[max(0, len(returns)-10):]
	s := 0.0
	for _, r := range last {
		s += r
	}
	return s / float64(len(last))
}

// finalLast10 is the extras' return value, sum(returns[-10:]) / 10 (0 with no finished episode).
func finalLast10(returns []float64) float64 {
	last := returns[max(0, len(returns)-10):]
	s := 0.0
	for _, r := range last {
		s += r
	}
	return s / 10
}

// checkCommon starts a Validate: it checks the settings DQN and PPO share (env, seed, learning
// rate) and returns the first error found so far and the check function that keeps the first.
func checkCommon(env string, seed int64, lr float64) (*error, func(bad bool, format string, args ...any)) {
	first := new(error) // the first bad setting: one line naming its flag
	check := func(bad bool, format string, args ...any) {
		if bad && *first == nil {
			*first = fmt.Errorf(format, args...)
		}
	}
	_, err := gym.Make(env)
	check(err != nil, "env: %v", err)
	check(seed < 0, "seed %d: Gymnasium's seed must be >= 0", seed)
	check(!(lr >= 0) || math.IsInf(lr, 0), "learning-rate %v must be a number >= 0", lr)
	return first, check
}
