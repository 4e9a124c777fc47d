package gymrl

import (
	"math"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

var testBackend = sync.OnceValue(func() backends.Backend { return backend.MustNewForTests() })

// extrasGAE is the extras' loop, verbatim, with nonterminal = 1 − done (buf['done'], float(terminated)):
//
//	for t in reversed(range(T)):
//	    nv = next_v if t == T - 1 else buf['val'][t + 1]
//	    delta = rew[t] + gamma * nv * nonterminal - val[t]
//	    A = delta + gamma * lam * nonterminal * A
func extrasGAE(rew, val []float64, done []bool, nextV, gamma, lam float64) []float64 {
	n := len(rew)
	adv := make([]float64, n)
	a := 0.0
	for t := n - 1; t >= 0; t-- {
		nv := nextV
		if t < n-1 {
			nv = val[t+1]
		}
		nonterminal := 1.0
		if done[t] {
			nonterminal = 0
		}
		delta := rew[t] + gamma*nv*nonterminal - val[t]
		a = delta + gamma*lam*nonterminal*a
		adv[t] = a
	}
	return adv
}

// gaeSegments (rl.GAE per episode piece) is the extras' multi-episode GAE loop.
func TestGAESegments_IsTheExtrasLoop(t *testing.T) {
	r := pyrand.New(5)
	for _, n := range []int{1, 7, 64} {
		ro := ppoRollout{nextValue: r.Random()}
		for i := range n {
			ro.rew = append(ro.rew, float64(r.RandBelow(3))-1)
			ro.val = append(ro.val, r.Random()*4-2)
			ro.terminated = append(ro.terminated, r.Random() < 0.2 || (n == 64 && i == n-1))
		}
		adv, ret := gaeSegments(ro, 0.99, 0.95)
		want := extrasGAE(ro.rew, ro.val, ro.terminated, ro.nextValue, 0.99, 0.95)
		for i := range want {
			if math.Abs(adv[i]-want[i]) > 1e-12 || math.Abs(ret[i]-(want[i]+ro.val[i])) > 1e-12 {
				t.Fatalf("n=%d t=%d: adv %v ret %v, want %v %v", n, i, adv[i], ret[i], want[i], want[i]+ro.val[i])
			}
		}
	}
}

// The GoMLX MLP is nn.Sequential(Linear, act, Linear, …) with PyTorch's [out, in] weights, and
// nn.Linear's default init bound 1/√fan_in.
// A truncated episode is not ended (the extras record float(terminated) only): its last step
// bootstraps with the next episode's first value and carries that episode's advantage, while a
// terminated one's next value is 0 and its advantage restarts.
func TestGAESegments_TruncationBootstrapsFromTheNextEpisode(t *testing.T) {
	const gamma, lam = 0.9, 0.5
	// Episode 1: steps 0-1, truncated at step 1 (not recorded); episode 2: steps 2-3, terminated
	// at 3; episode 3: step 4, unfinished (next value 7).
	ro := ppoRollout{rew: []float64{1, 1, 1, 1, 1}, val: []float64{2, 3, 5, 4, 6}, nextValue: 7,
		terminated: []bool{false, false, false, true, false}}
	adv, ret := gaeSegments(ro, gamma, lam)
	a4 := 1 + gamma*7 - 6
	a3 := 1.0 - 4
	a2 := 1 + gamma*4 - 5 + gamma*lam*a3
	a1 := 1 + gamma*5 - 3 + gamma*lam*a2 // bootstraps with V(episode 2's first observation)
	a0 := 1 + gamma*3 - 2 + gamma*lam*a1
	want := []float64{a0, a1, a2, a3, a4}
	for i := range want {
		if math.Abs(adv[i]-want[i]) > 1e-12 || math.Abs(ret[i]-(want[i]+ro.val[i])) > 1e-12 {
			t.Fatalf("t=%d: adv %v ret %v, want %v %v", i, adv[i], ret[i], want[i], want[i]+ro.val[i])
		}
	}
}

func TestMLP_ForwardAndInit(t *testing.T) {
	ctx := context.New()
	sizes := []int{4, 5, 3}
	m := newMLP(ctx, "/net", sizes, tanh, pyrand.New(1), true)
	var w [][]float32
	var bs [][]float32
	for i := range m.weights {
		bound := float32(1 / math.Sqrt(float64(sizes[i])))
		for _, v := range []*context.Variable{m.weights[i], m.biases[i]} {
			xs := tensors.MustCopyFlatData[float32](v.MustValue())
			for _, x := range xs {
				if x < -bound || x > bound {
					t.Fatalf("layer %d: %v outside ±%v", i, x, bound)
				}
			}
		}
		w = append(w, tensors.MustCopyFlatData[float32](m.weights[i].MustValue()))
		bs = append(bs, tensors.MustCopyFlatData[float32](m.biases[i].MustValue()))
	}
	eval, err := step.NewContextEval(testBackend(), ctx, func(ctx *context.Context, in named.Inputs) map[string]*Node {
		return map[string]*Node{"y": m.apply(in.Get("Obs"))}
	})
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{0.1, -0.2, 0.3, 0.05}
	out, err := eval.Run(named.Feed{Names: []string{"Obs"}, Values: []any{obsTensor([][]float32{x})}})
	if err != nil {
		t.Fatal(err)
	}
	got := step.Float64s(out["y"])
	h := make([]float64, len(x))
	for i, v := range x {
		h[i] = float64(v)
	}
	for l := range w {
		in, outN := sizes[l], sizes[l+1]
		next := make([]float64, outN)
		for o := range outN {
			s := float64(bs[l][o])
			for i := range in {
				s += float64(w[l][o*in+i]) * h[i]
			}
			if l+1 < len(w) {
				s = math.Tanh(s)
			}
			next[o] = s
		}
		h = next
	}
	for i := range h {
		if math.Abs(got[i]-h[i]) > 1e-5 {
			t.Fatalf("y[%d] = %v, want %v", i, got[i], h[i])
		}
	}
}

// The replay ring indexes transitions oldest first, as random.sample(deque(maxlen=n), k) does.
func TestReplay_IsADequeWithMaxlen(t *testing.T) {
	b := newReplay(3)
	for i := range 5 { // keeps 2, 3, 4
		b.add([]float32{float32(i)}, 0, float64(i), []float32{float32(i)}, false)
	}
	for j, want := range []float32{2, 3, 4} {
		if got := b.rew[(b.start+j)%3]; got != want {
			t.Fatalf("deque[%d] = %v, want %v", j, got, want)
		}
	}
	if b.len != 3 {
		t.Fatalf("len %d", b.len)
	}
}

func TestSampleCategorical(t *testing.T) {
	lp := []float32{float32(math.Log(0.25)), float32(math.Log(0.75))}
	for _, tc := range []struct {
		u    float64
		want int
	}{{0, 0}, {0.2499, 0}, {0.2501, 1}, {0.99999, 1}} {
		if got := sampleCategorical(lp, tc.u); got != tc.want {
			t.Errorf("u=%v: %d, want %d", tc.u, got, tc.want)
		}
	}
}

// copyFrom (load_state_dict) makes the target network's weights equal to the online network's.
func TestMLP_CopyFrom(t *testing.T) {
	ctx := context.New()
	q := newMLP(ctx, "/q_net", []int{4, 6, 2}, relu, pyrand.New(1), true)
	target := newMLP(ctx, "/target_net", []int{4, 6, 2}, relu, pyrand.New(2), false)
	if err := target.copyFrom(q); err != nil {
		t.Fatal(err)
	}
	for i := range q.weights {
		for _, p := range [][2]*context.Variable{{q.weights[i], target.weights[i]}, {q.biases[i], target.biases[i]}} {
			a := tensors.MustCopyFlatData[float32](p[0].MustValue())
			b := tensors.MustCopyFlatData[float32](p[1].MustValue())
			for j := range a {
				if a[j] != b[j] {
					t.Fatalf("layer %d: %v != %v", i, a[j], b[j])
				}
			}
		}
	}
	if target.weights[0].Trainable || !q.weights[0].Trainable {
		t.Error("the target network must not be trainable, the online one must")
	}
}

// A run is a function of its settings: the same seed gives the same curve.
func TestPPO_Deterministic(t *testing.T) {
	c := DefaultPPO()
	c.Iterations, c.NumSteps, c.MinibatchSize = 2, 128, 64
	a, err := RunPPO(testBackend(), c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunPPO(testBackend(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Episodes) != len(b.Episodes) || a.Final != b.Final {
		t.Fatalf("two runs differ: %v vs %v", a.Episodes, b.Episodes)
	}
	for i := range a.Episodes {
		if a.Episodes[i] != b.Episodes[i] {
			t.Fatalf("episode %d: %v vs %v", i, a.Episodes[i], b.Episodes[i])
		}
	}
}
