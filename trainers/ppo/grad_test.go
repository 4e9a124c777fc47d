package ppo

import (
	stdctx "context"
	"math"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// The gradients of the whole micro-batch graph (the policy's and the value model's forward passes
// on one context, the clipped losses, vf_coef) equal central finite differences of the loss, for
// the value head (value loss) and the policy's final norm (policy loss, at ratio 1): the gradient
// the driver's one AdamW applies to each model is the loss's.
func TestLossGraph_GradientsFD(t *testing.T) {
	policy := looptest.Model(t)
	c := tinyConfig(t, policy, rewardModel(t, policy, 3))
	c.VFCoef = 1
	backend := looptest.Backend(t)
	tr, err := Load(stdctx.Background(), c, policy, RunOptions{Env: loop.Env{Backend: backend}, Rows: tinyRows()})
	if err != nil {
		t.Fatal(err)
	}
	r, err := tr.newRollout(tr.nextPrompts(), c.Temperature, tr.rolloutSeed(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.scoreRollout(r); err != nil {
		t.Fatal(err)
	}
	// The rollout's values are the head's own, so v = v_old: inside the clip range, where both
	// value terms are the same function of v and the loss is smooth; likewise ρ = 1.
	feed, err := tr.microBatch(r, []int{0, 1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct{ scope, name string }{{trainable.ValueScope + "/score", "weight"}, {"/model/norm", "weight"}} {
		t.Run(v.scope, func(t *testing.T) {
			fdCheck(t, backend, tr, feed, tr.s.Model.Ctx.GetVariableByScopeAndName(v.scope, v.name))
		})
	}
}

func fdCheck(t *testing.T, backend backends.Backend, tr *Trainer, feed named.Feed, x *context.Variable) {
	t.Helper()
	if x == nil {
		t.Fatal("no such variable")
	}
	var sig named.Signature
	exec, err := context.NewExec(backend, tr.s.Model.Ctx.Reuse(), func(ctx *context.Context, nodes []*Node) []*Node {
		g := nodes[0].Graph()
		loss, _ := tr.spec.lossGraph(ctx, sig.Inputs(nodes), Scalar(g, dtypes.Float32, 1))
		return []*Node{ConvertDType(loss, dtypes.Float64), ConvertDType(Gradient(loss, x.ValueGraph(g))[0], dtypes.Float64)}
	})
	if err != nil {
		t.Fatal(err)
	}
	args, err := sig.Args(feed)
	if err != nil {
		t.Fatal(err)
	}
	eval := func() (float64, []float64) {
		outs, err := exec.Exec(args...)
		if err != nil {
			t.Fatal(err)
		}
		return step.ScalarValue(outs[0]), step.Float64s(outs[1])
	}
	w0, err := x.Value()
	if err != nil {
		t.Fatal(err)
	}
	base := tensors.MustCopyFlatData[float32](w0)
	dims := x.Shape().Dimensions
	_, grad := eval()
	set := func(i int, d float32) {
		w := append([]float32(nil), base...)
		w[i] += d
		if err := x.SetValue(tensors.FromFlatDataAndDimensions(w, dims...)); err != nil {
			t.Fatal(err)
		}
	}
	const eps = 1e-2
	worst := 0.0
	for _, i := range []int{0, 3, 7, 15, 31} {
		set(i, eps)
		up, _ := eval()
		set(i, -eps)
		down, _ := eval()
		fd := (up - down) / (2 * eps)
		if d := math.Abs(fd - grad[i]); d > 1e-4+1e-2*math.Abs(fd) {
			t.Errorf("∂loss/∂w[%d]: graph %.6g, finite differences %.6g", i, grad[i], fd)
		}
		worst = max(worst, math.Abs(fd-grad[i]))
		if grad[i] == 0 {
			t.Errorf("∂loss/∂w[%d] is 0: the loss does not reach the weight", i)
		}
	}
	set(0, 0)
	t.Logf("max |graph − finite differences| = %.2g (gradients %.3g %.3g ...)", worst, grad[0], grad[3])
}

// A micro-batch is padded to its own longest query, not the dataset's: with the queries laid out
// 24 wide, a micro-batch whose queries hold at most 8 tokens is fed 8 + response_length wide, and
// its loss and metrics are those of the 24-wide layout (the leading pads are masked and not
// counted in the positions).
func TestMicroBatch_OwnQueryWidth(t *testing.T) {
	policy := looptest.Model(t)
	c := tinyConfig(t, policy, rewardModel(t, policy, 3))
	backend := looptest.Backend(t)
	tr, err := Load(stdctx.Background(), c, policy, RunOptions{Env: loop.Env{Backend: backend}, Rows: tinyRows()})
	if err != nil {
		t.Fatal(err)
	}
	if tr.promptLen != 8 {
		t.Fatalf("tiny rows' query width %d, want 8", tr.promptLen)
	}
	tr.promptLen = 24 // as if the dataset had a 24-token prompt
	r, err := tr.newRollout(tr.nextPrompts(), c.Temperature, tr.rolloutSeed(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.scoreRollout(r); err != nil {
		t.Fatal(err)
	}
	idx := []int{0, 1, 2, 3}
	feed, err := tr.microBatch(r, idx)
	if err != nil {
		t.Fatal(err)
	}
	in := named.Bind[MicroBatch[any]](feed)
	full := in
	var queries, responses [][]int32
	for _, i := range idx {
		queries, responses = append(queries, r.Queries[i]), append(responses, r.Responses[i])
	}
	if full.Sequences, err = tr.sequences(queries, responses); err != nil {
		t.Fatal(err)
	}
	if w := len(in.IDs.([][]int32)[0]); w != 8+c.ResponseLength {
		t.Fatalf("micro-batch width %d, want 8 + %d", w, c.ResponseLength)
	}
	var sig named.Signature
	exec, err := context.NewExec(backend, tr.s.Model.Ctx.Reuse(), func(ctx *context.Context, nodes []*Node) []*Node {
		loss, ms := tr.spec.lossGraph(ctx, sig.Inputs(nodes), Scalar(nodes[0].Graph(), dtypes.Float32, 1))
		return []*Node{ConvertDType(loss, dtypes.Float64), ms["loss/value"], ms["policy/entropy"], ms["policy/approxkl"]}
	})
	if err != nil {
		t.Fatal(err)
	}
	values := func(f named.Feed) []float64 {
		args, err := sig.Args(f)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := exec.Exec(args...)
		if err != nil {
			t.Fatal(err)
		}
		var v []float64
		for _, o := range outs {
			v = append(v, step.ScalarValue(o))
		}
		return v
	}
	got, want := values(feed), values(named.Of[any](full))
	for i := range want {
		if d := math.Abs(got[i] - want[i]); d > 1e-6*math.Max(1, math.Abs(want[i])) {
			t.Errorf("output %d: %v 8 wide, %v 24 wide", i, got[i], want[i])
		}
	}
}
