package corridor

import (
	"fmt"
	"math"
	"strconv"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/internal/pyrand"
)

// dqnUpdate computes 식 (4.1)-(4.3) on one batch with the target network for y, and takes one
// SGD step θ ← θ − lr·∇L. It returns the loss. Gradient flows only into the chosen action's Q.
func dqnUpdate(net, target *MLP, batch []Experience, lr, gamma float64) float64 {
	grads, loss := net.zerosLike(), 0.0
	n := float64(len(batch))
	for _, b := range batch {
		qNext, _ := target.Forward(oneHot(b.S2, NumStates))
		next := 0.0
		if !b.Terminated {
			next = pyMax(qNext[0], qNext[1])
		}
		y := b.R + gamma*next // 식 (4.1)
		q, cache := net.Forward(oneHot(b.S, NumStates))
		err := q[b.A] - y
		loss += 0.5 * (err * err) / n // 식 (4.2)
		dq := make([]float64, len(q))
		dq[b.A] = err
		grads.addGrads(net.Backward(cache, dq), 1/n) // 식 (4.3)
	}
	net.addGrads(grads, -lr)
	return loss
}

// Phase4Config holds `posttrain toy dqn`'s settings (the course's train_dqn arguments).
type Phase4Config struct {
	Seed           int64
	Steps          int
	BatchSize      int
	LR             float64
	Gamma          float64
	BufferSize     int
	LearningStarts int
	TargetEvery    int
	Hidden         int
}

// DefaultPhase4 is the course's train_dqn() defaults.
func DefaultPhase4() Phase4Config {
	return Phase4Config{Seed: 0, Steps: 3000, BatchSize: 16, LR: 0.05, Gamma: 0.9, BufferSize: 1000,
		LearningStarts: 200, TargetEvery: 50, Hidden: 16}
}

// Validate checks the settings; rng.sample needs at least batch-size transitions in the buffer.
func (c Phase4Config) Validate() error {
	if err := firstError(checkAtLeast("steps", c.Steps, 0), checkAtLeast("batch-size", c.BatchSize, 1),
		checkNonNegative("lr", c.LR), checkGamma(c.Gamma), checkAtLeast("buffer-size", c.BufferSize, 1),
		checkAtLeast("learning-starts", c.LearningStarts, 0), checkAtLeast("target-every", c.TargetEvery, 1),
		checkAtLeast("hidden", c.Hidden, 1)); err != nil {
		return err
	}
	if c.BatchSize > c.BufferSize {
		return fmt.Errorf("batch-size (%d) must be <= buffer-size (%d)", c.BatchSize, c.BufferSize)
	}
	if c.BatchSize > c.LearningStarts+1 {
		return fmt.Errorf("batch-size (%d) must be <= learning-starts+1 (%d): the first update samples that many transitions",
			c.BatchSize, c.LearningStarts+1)
	}
	return nil
}

// Args is the settings as the course's JSON "args" (without "json").
func (c Phase4Config) Args() Object {
	return Object{{"seed", c.Seed}, {"steps", c.Steps}, {"batch_size", c.BatchSize}, {"lr", Float(c.LR)},
		{"gamma", Float(c.Gamma)}, {"buffer_size", c.BufferSize}, {"learning_starts", c.LearningStarts},
		{"target_every", c.TargetEvery}, {"hidden", c.Hidden}}
}

// TrainDQN is the course's train_dqn: an MLP(5, hidden, 2) Q network, ε-greedy with
// ε = max(0.05, 1 − step/1500), a replay buffer (deque with maxlen) sampled with rng.sample, and
// a target network copied every TargetEvery steps. Truncation is not stored as termination.
func TrainDQN(c Phase4Config) *MLP {
	rng := pyrand.New(c.Seed)
	net := NewMLP(NumStates, c.Hidden, 2, rng)
	target := net.clone()
	var buffer []Experience
	env := NewCorridor()
	s := env.Reset()
	batch := make([]Experience, c.BatchSize)
	for step := range c.Steps {
		epsilon := pyMax(0.05, 1.0-float64(step)/1500)
		q, _ := net.Forward(oneHot(s, NumStates))
		var a int
		if rng.Random() < epsilon {
			a = rng.Randrange(2)
		} else {
			a = greedyAction([2]float64{q[0], q[1]})
		}
		s2, r, term, trunc := env.Step(a)
		if len(buffer) == c.BufferSize {
			buffer = buffer[1:] // deque(maxlen): the oldest entry falls off
		}
		buffer = append(buffer, Experience{s, a, r, s2, term})
		if term || trunc {
			s = env.Reset()
		} else {
			s = s2
		}
		if step >= c.LearningStarts {
			for i, j := range rng.Sample(len(buffer), c.BatchSize) {
				batch[i] = buffer[j]
			}
			dqnUpdate(net, target, batch, c.LR, c.Gamma)
		}
		if step%c.TargetEvery == 0 {
			target = net.clone()
		}
	}
	return net
}

// GradCheck is one parameter of phase 4's finite-difference check.
type GradCheck struct {
	Param             string
	I, J              int // J < 0 for a bias
	Numeric, Analytic float64
}

// Phase4GradCheck compares the hand-written backprop of MLP(5, 4, 2, Random(1)) with central
// differences (ε = 1e-6) of L = ½(q_→(one_hot(2)) − 0.7)² on five parameters.
func Phase4GradCheck() []GradCheck {
	mlp := NewMLP(NumStates, 4, 2, pyrand.New(1))
	x, a, y, eps := oneHot(2, NumStates), Right, 0.7, 1e-6
	lossFn := func() float64 {
		q, _ := mlp.Forward(x)
		d := q[a] - y
		return 0.5 * (d * d)
	}
	q, cache := mlp.Forward(x)
	dq := make([]float64, 2)
	dq[a] = q[a] - y
	g := mlp.Backward(cache, dq)
	var out []GradCheck
	for _, p := range []GradCheck{{"W1", 0, 2, 0, 0}, {"W1", 3, 2, 0, 0}, {"W2", 1, 0, 0, 0}, {"W2", 1, 3, 0, 0}, {"b1", 1, -1, 0, 0}} {
		ptr, gv := paramPtr(mlp, p), *paramPtr(g, p)
		*ptr += eps
		up := lossFn()
		*ptr += -2 * eps
		down := lossFn()
		*ptr += eps
		p.Numeric, p.Analytic = (up-down)/(2*eps), gv
		out = append(out, p)
	}
	return out
}

func paramPtr(m *MLP, p GradCheck) *float64 {
	switch p.Param {
	case "W1":
		return &m.W1[p.I][p.J]
	case "W2":
		return &m.W2[p.I][p.J]
	case "b1":
		return &m.B1[p.I]
	}
	return &m.B2[p.I]
}

// Phase4Check is phase 4's hand_check.
type Phase4Check struct {
	Linear     *LinearQ // after the scripted episodes A→B→C with LinearQ (target = online, lr 0.5)
	BatchLoss  float64  // one step on the fixed batch of 표 4.1 with a frozen target
	LinearStep *LinearQ // W after that step
	Grad       []GradCheck
}

// Phase4HandCheck computes phase 4's hand_check.
func Phase4HandCheck() Phase4Check {
	net := NewLinearQ()
	for _, actions := range [][]int{{Right, Right}, {Right, Right}, {Left, Left}} {
		_, _, _, steps := runActions(actions)
		for _, st := range steps {
			net.SGDStep([]Experience{{st.S, st.A, st.R, st.S2, st.Terminated}}, net, 0.5, 0.9)
		}
	}
	h := Phase4Check{Linear: net.clone()}
	target := net.clone()
	h.BatchLoss = net.SGDStep([]Experience{{2, Right, 0.0, 3, false}, {3, Right, 1.0, 4, true}}, target, 0.5, 0.9)
	h.LinearStep = net
	h.Grad = Phase4GradCheck()
	return h
}

func (l *LinearQ) clone() *LinearQ {
	return &LinearQ{W: [2][]float64{append([]float64(nil), l.W[0]...), append([]float64(nil), l.W[1]...)}}
}

// Phase4Result is everything phase 4 prints and reports.
type Phase4Result struct {
	Config    Phase4Config
	HandCheck Phase4Check
	Net       *MLP
	Q         QTable // Net's Q of every NonTerminal state
	QStar     QTable
}

// RunPhase4 runs phase 4: LinearQ and backprop hand checks, then DQN against Q*.
func RunPhase4(c Phase4Config) (*Phase4Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Phase4Result{Config: c, HandCheck: Phase4HandCheck(), QStar: OptimalQ(c.Gamma, 100)}
	for _, g := range r.HandCheck.Grad {
		if !(math.Abs(g.Numeric-g.Analytic) < 1e-6) {
			return nil, fmt.Errorf("backprop check: %s[%d][%d] analytic %v, numeric %v", g.Param, g.I, g.J, g.Analytic, g.Numeric)
		}
	}
	r.Net = TrainDQN(c)
	for _, s := range NonTerminal {
		q, _ := r.Net.Forward(oneHot(s, NumStates))
		r.Q[s] = [2]float64{q[0], q[1]}
	}
	return r, nil
}

// Lines is what phase 4 prints.
func (r *Phase4Result) Lines() []string {
	w := r.HandCheck.LinearStep.W[Right]
	lines := []string{
		fmt.Sprintf("batch loss = %s, Q(2,→): 0.225 → %s, Q(3,→): 0.75 → %s",
			pyfmt.Fixed(r.HandCheck.BatchLoss, 5, false), pyfmt.Fixed(w[2], 4, false), pyfmt.Fixed(w[3], 4, false)),
		"역전파 gradient == 수치미분: 확인",
	}
	for _, s := range NonTerminal {
		lines = append(lines, qTableLine(s, r.Q[s], r.QStar[s]))
	}
	return lines
}

// Results is phase 4's JSON results: Q of each state and the trained parameters.
func (r *Phase4Result) Results() Object {
	var q Object
	for _, s := range NonTerminal {
		q = append(q, Field{strconv.Itoa(s), floats(r.Q[s][:])})
	}
	rows := func(w [][]float64) [][]Float {
		out := make([][]Float, len(w))
		for i := range w {
			out[i] = floats(w[i])
		}
		return out
	}
	params := Object{{"W1", rows(r.Net.W1)}, {"b1", floats(r.Net.B1)}, {"W2", rows(r.Net.W2)}, {"b2", floats(r.Net.B2)}}
	return Object{{"Q", q}, {"params", params}}
}
