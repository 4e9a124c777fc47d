package corridor

import (
	"fmt"
	"strconv"

	"github.com/posttrain/posttrain/internal/pyfmt"
	"github.com/posttrain/posttrain/internal/pyrand"
)

// QTable is Q[s][a] for every cell (terminal rows stay 0).
type QTable [NumStates][2]float64

// QLearningUpdate is 식 (3.2): Q(s,a) ← Q(s,a) + α[r + γ(1−terminated)·max_a′ Q(s′,a′) − Q(s,a)].
// It returns the TD error.
func QLearningUpdate(q *QTable, s, a int, r float64, s2 int, terminated bool, alpha, gamma float64) float64 {
	next := 0.0
	if !terminated {
		next = pyMax(q[s2][Left], q[s2][Right])
	}
	tdErr := r + gamma*next - q[s][a]
	q[s][a] += alpha * tdErr
	return tdErr
}

// EpsilonGreedy is 식 (3.3): with probability ε a random action (rng.randrange(2)), otherwise a
// uniformly random choice among the actions with the largest Q — rng.choice consumes random bits
// even when only one action ties.
func EpsilonGreedy(q *QTable, s int, epsilon float64, rng *pyrand.Rand) int {
	if rng.Random() < epsilon {
		return rng.Randrange(2)
	}
	best := pyMax(q[s][Left], q[s][Right])
	var ties []int
	for a, v := range q[s] {
		if v == best {
			ties = append(ties, a)
		}
	}
	return ties[rng.Choice(len(ties))]
}

// TrainQLearning is the course's train_q_learning on the corridor: ε-greedy behaviour,
// greedy (max) target, one seeded rng for the whole run.
func TrainQLearning(episodes int, alpha, gamma, epsilon float64, seed int64) QTable {
	rng, env := pyrand.New(seed), NewCorridor()
	var q QTable
	for range episodes {
		s := env.Reset()
		for {
			a := EpsilonGreedy(&q, s, epsilon, rng)
			s2, r, term, trunc := env.Step(a)
			QLearningUpdate(&q, s, a, r, s2, term, alpha, gamma)
			if term || trunc {
				break
			}
			s = s2
		}
	}
	return q
}

// OptimalQ applies 식 (3.1), the Bellman optimality equation, sweeps times (value iteration):
// Q*(s,a) = r + γ(1−done)·max_a′ Q*(s′,a′). Terminal rows stay 0.
func OptimalQ(gamma float64, sweeps int) QTable {
	var q QTable
	for range sweeps {
		var next QTable
		for _, s := range NonTerminal {
			for _, a := range []int{Left, Right} {
				s2, r, done := model.Transition(s, a)
				v := 0.0
				if !done {
					v = pyMax(q[s2][Left], q[s2][Right])
				}
				next[s][a] = r + gamma*v
			}
		}
		q = next
	}
	return q
}

// greedyAction is max((LEFT, RIGHT), key=q.__getitem__): ties go to LEFT.
func greedyAction(q [2]float64) int {
	if q[Right] > q[Left] {
		return Right
	}
	return Left
}

// pyMax is Python's max(a, b): a unless b > a.
func pyMax(a, b float64) float64 {
	if b > a {
		return b
	}
	return a
}

// scriptedEpisode plays actions from the start with Q-learning updates (α given, γ = 0.9).
func scriptedEpisode(q *QTable, actions []int, alpha float64) {
	_, _, _, steps := runActions(actions)
	for _, st := range steps {
		QLearningUpdate(q, st.S, st.A, st.R, st.S2, st.Terminated, alpha, 0.9)
	}
}

// Phase3Check is phase 3's hand_check: Q* and Q after scripted episodes A (→→), B (→→), C (←←).
type Phase3Check struct {
	QStar   QTable
	A, B, C QTable
}

// Phase3HandCheck computes phase 3's hand_check (α = 0.5, γ = 0.9).
func Phase3HandCheck() Phase3Check {
	h := Phase3Check{QStar: OptimalQ(0.9, 100)}
	var q QTable
	scriptedEpisode(&q, []int{Right, Right}, 0.5)
	h.A = q
	scriptedEpisode(&q, []int{Right, Right}, 0.5)
	h.B = q
	scriptedEpisode(&q, []int{Left, Left}, 0.5)
	h.C = q
	return h
}

// qTableLine is "s=1: Q(s,←)=-0.992  Q(s,→)=+0.810   |  Q*(s,←)=-1.000  Q*(s,→)=+0.810".
func qTableLine(s int, q, qstar [2]float64) string {
	f := func(x float64) string { return pyfmt.Fixed(x, 3, true) }
	return fmt.Sprintf("s=%d: Q(s,←)=%s  Q(s,→)=%s   |  Q*(s,←)=%s  Q*(s,→)=%s",
		s, f(q[Left]), f(q[Right]), f(qstar[Left]), f(qstar[Right]))
}

// qStarObject is {"1,0": Q*(1,←), "1,1": …} in the course's (s, a) order.
func qStarObject(q *QTable) Object {
	var o Object
	for _, s := range NonTerminal {
		for _, a := range []int{Left, Right} {
			o = append(o, Field{strconv.Itoa(s) + "," + strconv.Itoa(a), Float(q[s][a])})
		}
	}
	return o
}
