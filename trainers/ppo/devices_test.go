package ppo

import (
	stdctx "context"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/internal/backend/devicetest"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// dpConfig is the tiny PPO run on `devices` devices with the same global batch whatever the
// count: rollouts of 8 prompts (per-device batch 4/devices × devices × accumulation 2) generated
// and scored 4 rows a pass (4/devices a device), 2 PPO epochs of 2 mini-batches, 2 updates.
func dpConfig(t *testing.T, policy, rm string, devices int) *Config {
	t.Helper()
	c := tinyConfig(t, policy, rm)
	c.Devices, c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps = devices, 4/devices, 2
	c.LocalRolloutForwardBatchSize = 4 / devices // 4 rows a pass over all devices
	c.LearningRate = 1e-3
	c.Resolve()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// dpRun runs c on b, interrupted (Ctrl-C) after update stopAt when stopAt > 0, and returns its
// updates and the policy it wrote (the final one, or nil when interrupted).
func dpRun(t *testing.T, b backends.Backend, c *Config, stopAt int) ([]UpdateInfo, map[string][]float32) {
	t.Helper()
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	defer cancel(nil)
	var infos []UpdateInfo
	_, err := Run(ctx, c, c.Model, RunOptions{Env: loop.Env{Backend: b}, Rows: tinyRows(), OnUpdate: func(u UpdateInfo) {
		infos = append(infos, u)
		if u.Update == stopAt {
			cancel(checkpoint.ErrInterrupted)
		}
	}})
	if stopAt > 0 {
		if !errors.Is(err, loop.ErrInterrupted) {
			t.Fatalf("interrupted run: %v, want loop.ErrInterrupted", err)
		}
		return infos, nil
	}
	if err != nil {
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

// samePolicy checks got against want within 1e-5 of ‖want‖∞.
func samePolicy(t *testing.T, what string, got, want map[string][]float32) {
	t.Helper()
	norm, d := 0.0, 0.0
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if len(got[name]) != len(want[name]) {
			t.Fatalf("%s: %s has %d values, want %d", what, name, len(got[name]), len(want[name]))
		}
		for j, w := range want[name] {
			norm = math.Max(norm, math.Abs(float64(w)))
			d = math.Max(d, math.Abs(float64(got[name][j]-w)))
		}
	}
	if !(d <= 1e-5*norm) {
		t.Errorf("%s: final policy ‖Δθ‖∞ %.3g, %.3g of ‖θ‖∞, want ≤ 1e-5", what, d, d/norm)
	} else {
		t.Logf("%s: final policy ‖Δθ‖∞ %.2g of ‖θ‖∞", what, d/norm)
	}
}

// PPO data parallel on 2 and 4 of XLA's CPU devices (each micro-batch of an update's optimizer
// steps, the rollout's generation and its policy, reference, value and reward-model passes split
// along the batch axis, the weights replicated) gives the 1-device run with the same global batch (rollouts of 8 prompts, 2 PPO
// epochs of 2 mini-batches: 4 optimizer steps an update, 2 updates): the same responses, every
// logged loss and objective within 1e-5 relative, and the final policy within 1e-5 of ‖θ‖∞.
func TestPPO_DataParallelEqualsOneDevice(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 11)
	want, w1 := dpRun(t, b, dpConfig(t, policy, rm, 1), 0)
	for _, n := range []int{2, 4} {
		got, wn := dpRun(t, b, dpConfig(t, policy, rm, n), 0)
		if len(got) != len(want) {
			t.Fatalf("devices %d: %d updates, want %d", n, len(got), len(want))
		}
		for i := range want {
			if fmt.Sprint(got[i].Scored.Responses) != fmt.Sprint(want[i].Scored.Responses) {
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
		samePolicy(t, fmt.Sprintf("devices %d", n), wn, w1)
	}
}

// A PPO checkpoint written on 4 devices resumes on 1, and one written on 1 resumes on 2 (the
// policy, value model, both AdamW states and the prompt position are replicated, so nothing in
// them names a device count), and each ends as the straight one-device run, within 1e-5 of ‖θ‖∞.
func TestPPO_ResumeOnOtherDeviceCount(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	policy := looptest.Model(t)
	rm := rewardModel(t, policy, 11)
	_, want := dpRun(t, b, dpConfig(t, policy, rm, 1), 0)
	for _, counts := range [][2]int{{4, 1}, {1, 2}} {
		c := dpConfig(t, policy, rm, counts[0])
		dpRun(t, b, c, 1)
		if _, err := os.Stat(filepath.Join(c.OutputDir, "checkpoint-1", checkpoint.StateName)); err != nil {
			t.Fatalf("the interrupted %d-device run saved no checkpoint-1: %v", counts[0], err)
		}
		r := dpConfig(t, policy, rm, counts[1])
		r.OutputDir, r.Resume = c.OutputDir, true
		_, got := dpRun(t, b, r, 0)
		samePolicy(t, fmt.Sprintf("%d devices then %d", counts[0], counts[1]), got, want)
	}
}
