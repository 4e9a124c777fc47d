package corridor

import "github.com/posttrain/posttrain/internal/pyrand"

// oneHot is the course's one_hot(s, n).
func oneHot(s, n int) []float64 {
	x := make([]float64, n)
	x[s] = 1.0
	return x
}

// dot is sum(w * x for w, x in zip(ws, xs)), left to right from 0.
func dot(ws, xs []float64) float64 {
	sum := 0.0
	for i, w := range ws {
		sum += w * xs[i]
	}
	return sum
}

// Experience is one replay-buffer entry (s, a, r, s′, terminated); truncation is not stored.
type Experience struct {
	S, A       int
	R          float64
	S2         int
	Terminated bool
}

// LinearQ is a one-hot input and a bias-free linear layer: W[a][s] is one cell of a Q table.
type LinearQ struct{ W [2][]float64 }

// NewLinearQ is LinearQ(n_states=5, n_actions=2), all zeros.
func NewLinearQ() *LinearQ {
	return &LinearQ{W: [2][]float64{make([]float64, NumStates), make([]float64, NumStates)}}
}

// Q is [W[a]·one_hot(s) for a] = [W[a][s] for a].
func (l *LinearQ) Q(s int) [2]float64 {
	x := oneHot(s, len(l.W[0]))
	return [2]float64{dot(l.W[0], x), dot(l.W[1], x)}
}

// SGDStep applies 식 (4.1)-(4.3) once, averaged over batch, and returns the loss:
//
//	y = r + γ(1−done)·max_a′ Q_target(s′,a′)      (4.1)
//	L = (1/B) Σ ½(Q(s,a) − y)²                     (4.2)
//	∂L/∂W[a][s] = (1/B) Σ (Q(s,a) − y)             (4.3)
func (l *LinearQ) SGDStep(batch []Experience, target *LinearQ, lr, gamma float64) float64 {
	n := float64(len(batch))
	loss := 0.0
	var grads [2][NumStates]float64
	for _, b := range batch {
		next := 0.0
		if !b.Terminated {
			q := target.Q(b.S2)
			next = pyMax(q[0], q[1])
		}
		y := b.R + gamma*next
		err := l.Q(b.S)[b.A] - y
		loss += 0.5 * (err * err) / n
		grads[b.A][b.S] += err / n
	}
	for a := range grads { // untouched cells subtract lr·0.0: unchanged, as in the course
		for s, g := range grads[a] {
			l.W[a][s] -= lr * g
		}
	}
	return loss
}

// MLP is input → hidden (ReLU) → one Q per action, with backprop written by hand.
// W1 is hidden×in, W2 is out×hidden.
type MLP struct {
	W1, W2 [][]float64
	B1, B2 []float64
}

// NewMLP draws W1 then W2 row by row from rng.gauss(0, 0.5); biases start at 0.
func NewMLP(nIn, nHidden, nOut int, rng *pyrand.Rand) *MLP {
	gaussRows := func(rows, cols int) [][]float64 {
		w := make([][]float64, rows)
		for i := range w {
			w[i] = make([]float64, cols)
			for j := range w[i] {
				w[i][j] = rng.Gauss(0, 0.5)
			}
		}
		return w
	}
	m := &MLP{W1: gaussRows(nHidden, nIn), B1: make([]float64, nHidden)}
	m.W2, m.B2 = gaussRows(nOut, nHidden), make([]float64, nOut)
	return m
}

// mlpCache keeps the forward pass's x, z = W1·x + b1 and h = ReLU(z) for Backward.
type mlpCache struct{ x, z, h []float64 }

// Forward is q = W2·ReLU(W1·x + b1) + b2.
func (m *MLP) Forward(x []float64) ([]float64, mlpCache) {
	z := make([]float64, len(m.W1))
	h := make([]float64, len(m.W1))
	for j, row := range m.W1 {
		z[j] = dot(row, x) + m.B1[j]
		if z[j] > 0.0 { // max(0.0, z): 0.0 also for −0.0
			h[j] = z[j]
		}
	}
	q := make([]float64, len(m.W2))
	for o, row := range m.W2 {
		q[o] = dot(row, h) + m.B2[o]
	}
	return q, mlpCache{x, z, h}
}

// Backward takes dq = ∂L/∂q and returns every parameter's gradient by the chain rule:
// ∂W2 = dq·hᵀ, ∂b2 = dq, dh = W2ᵀ·dq, dz = dh·[z > 0], ∂W1 = dz·xᵀ, ∂b1 = dz.
func (m *MLP) Backward(c mlpCache, dq []float64) *MLP {
	g := &MLP{W2: make([][]float64, len(dq)), B2: append([]float64(nil), dq...)}
	for o, d := range dq {
		g.W2[o] = scaled(c.h, d)
	}
	dz := make([]float64, len(c.h))
	for j := range c.h {
		dh := 0.0
		for o := range dq {
			dh += dq[o] * m.W2[o][j]
		}
		if c.z[j] > 0 {
			dz[j] = dh
		}
	}
	g.W1 = make([][]float64, len(dz))
	for j, d := range dz {
		g.W1[j] = scaled(c.x, d)
	}
	g.B1 = dz
	return g
}

// scaled is [d * x for x in xs].
func scaled(xs []float64, d float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = d * x
	}
	return out
}

// zerosLike is a parameter set of the same shape, all 0.0.
func (m *MLP) zerosLike() *MLP {
	z := &MLP{B1: make([]float64, len(m.B1)), B2: make([]float64, len(m.B2))}
	for _, row := range m.W1 {
		z.W1 = append(z.W1, make([]float64, len(row)))
	}
	for _, row := range m.W2 {
		z.W2 = append(z.W2, make([]float64, len(row)))
	}
	return z
}

// clone is copy.deepcopy(net).
func (m *MLP) clone() *MLP {
	c := m.zerosLike()
	for j := range m.W1 {
		copy(c.W1[j], m.W1[j])
	}
	for o := range m.W2 {
		copy(c.W2[o], m.W2[o])
	}
	copy(c.B1, m.B1)
	copy(c.B2, m.B2)
	return c
}

// addGrads is the course's add_grads: p += scale·g, in the order W1, b1, W2, b2.
func (m *MLP) addGrads(g *MLP, scale float64) {
	for j, row := range m.W1 {
		addScaled(row, g.W1[j], scale)
	}
	addScaled(m.B1, g.B1, scale)
	for o, row := range m.W2 {
		addScaled(row, g.W2[o], scale)
	}
	addScaled(m.B2, g.B2, scale)
}

func addScaled(p, g []float64, scale float64) {
	for i := range p {
		p[i] += scale * g[i]
	}
}
