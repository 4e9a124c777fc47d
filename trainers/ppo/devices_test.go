package ppo

import (
	stdctx "context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/loop/looptest"
)

// cpuDevices is XLA's CPU plugin with 4 devices, made once (the pure-Go backend has one).
var cpuDevices = sync.OnceValues(func() (backends.Backend, error) {
	return backend.NewWithOptions("xla:cpu", backend.Options{CPUDevices: 4})
})

// PPO data parallel on 2 and 4 of XLA's CPU devices (each micro-batch of an update's optimizer
// steps split along the batch axis, the weights replicated; generation and the rollout's scoring
// on one device) gives the 1-device run with the same global batch (rollouts of 8 prompts, 2 PPO
// epochs of 2 mini-batches: 4 optimizer steps an update, 2 updates): the same responses, every
// logged loss and objective within 1e-5 relative, and the final policy within 1e-5 of ‖θ‖∞.
func TestPPO_DataParallelEqualsOneDevice(t *testing.T) {
	if !backend.IsXLA(backend.ForTests()) {
		t.Skipf("data parallel runs on XLA's CPU devices: with %s=xla:cpu (make unit-xla)", backend.TestEnv)
	}
	b, err := cpuDevices()
	if errors.Is(err, backend.ErrNoPlugin) {
		t.Skipf("data parallel needs several devices: XLA's CPU plugin is not installed (make xla-cpu): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 11)
	do := func(devices int) ([]UpdateInfo, map[string][]float32) {
		c := tinyConfig(t, policy, rm)
		c.Devices, c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps = devices, 4/devices, 2
		c.LearningRate = 1e-3
		c.Resolve()
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		var infos []UpdateInfo
		if _, err := Run(stdctx.Background(), c, c.Model, RunOptions{Backend: b, Rows: tinyRows(),
			OnUpdate: func(u UpdateInfo) { infos = append(infos, u) }}); err != nil {
			t.Fatal(err)
		}
		ws, err := safetensors.ReadModelDir(c.OutputDir)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]float32{}
		for name, w := range ws {
			if out[name], err = w.Float32s(); err != nil {
				t.Fatal(err)
			}
		}
		return infos, out
	}
	want, w1 := do(1)
	norm := 0.0
	for _, x := range w1 {
		for _, v := range x {
			norm = math.Max(norm, math.Abs(float64(v)))
		}
	}
	for _, n := range []int{2, 4} {
		got, wn := do(n)
		if len(got) != len(want) {
			t.Fatalf("devices %d: %d updates, want %d", n, len(got), len(want))
		}
		for i := range want {
			if fmt.Sprint(got[i].Rollout.Responses) != fmt.Sprint(want[i].Rollout.Responses) {
				t.Fatalf("devices %d update %d: other responses", n, i+1)
			}
			for _, k := range []string{"loss/policy_avg", "loss/value_avg", "objective/kl", "objective/scores", "policy/approxkl_avg", "val/ratio"} {
				g, w := got[i].Metrics[k], want[i].Metrics[k]
				// loss/policy_avg (whitened advantages) and approxkl cancel to about 0: against 1e-2;
				// objective/kl sums log π − log π_ref over the response: against the size of its
				// terms, the summed −log π (objective/entropy), as TestPPO_TRLParity.
				scale := math.Max(math.Abs(w), 1e-2)
				if k == "objective/kl" {
					scale = math.Max(scale, math.Abs(want[i].Metrics["objective/entropy"]))
				}
				if d := math.Abs(g - w); !(d <= 1e-5*scale) {
					t.Errorf("devices %d update %d %s: %.9g, want %.9g", n, i+1, k, g, w)
				}
			}
		}
		d := 0.0
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range w1 {
				if !yield(k) {
					return
				}
			}
		}) {
			for j := range w1[name] {
				d = math.Max(d, math.Abs(float64(wn[name][j]-w1[name][j])))
			}
		}
		if !(d <= 1e-5*norm) {
			t.Errorf("devices %d: final policy ‖Δθ‖∞ %.3g, %.3g of ‖θ‖∞, want ≤ 1e-5", n, d, d/norm)
		} else {
			t.Logf("devices %d: final policy ‖Δθ‖∞ %.2g of ‖θ‖∞", n, d/norm)
		}
	}
}
