package grpo

import (
	stdctx "context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tools"
	"github.com/posttrain/posttrain/internal/backend/devicetest"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// GRPO data parallel on 2 and 4 of XLA's CPU devices (each training micro-batch, the generation
// batch's rows and the old/reference scoring passes split along the batch axis by the SPMD
// partitioner, the weights replicated) gives the 1-device run with the same global batch: the same completions, per-step loss and grad_norm and the final weights within
// 1e-5 relative (the weights as one vector in the max norm, as the driver's own test), with
// gradient accumulation, off-policy (num_iterations 2) and a reference model (β 0.04).
func TestGRPO_DataParallelEqualsOneDevice(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	want, w1 := dpRun(t, b, dpConfig(t, 1), 0)
	for _, n := range []int{2, 4} {
		got, wn := dpRun(t, b, dpConfig(t, n), 0)
		if len(got) != len(want) {
			t.Fatalf("devices %d: %d steps, want %d", n, len(got), len(want))
		}
		for i := range want {
			if g, w := got[i].Scored.Completions, want[i].Scored.Completions; len(g) != len(w) {
				t.Fatalf("devices %d step %d: %d completions, want %d", n, i+1, len(g), len(w))
			}
			for j := range want[i].Scored.Completions {
				if !slices.Equal(got[i].Scored.Completions[j], want[i].Scored.Completions[j]) {
					t.Fatalf("devices %d step %d: completion %d %v, want %v", n, i+1, j, got[i].Scored.Completions[j], want[i].Scored.Completions[j])
				}
			}
			for _, k := range []struct {
				name string
				g, w float64
			}{{"loss", got[i].Loss, want[i].Loss}, {"grad_norm", got[i].GradNorm, want[i].GradNorm}} {
				// The loss cancels to about 0 at ρ = 1 (centred advantages): against 1e-2 at least.
				scale := math.Max(math.Abs(k.w), 1e-2)
				if d := math.Abs(k.g - k.w); !(d <= 1e-5*scale) {
					t.Errorf("devices %d step %d %s: %.9g, want %.9g", n, i+1, k.name, k.g, k.w)
				}
			}
		}
		closeWeights(t, fmt.Sprintf("devices %d", n), w1, wn)
	}
}

// Multi-turn rollouts (the tiny model calling the calculator, toolsRun's setup) split over 2
// devices as single-turn ones do: the same completions, tool turns and conversations, and the
// 1-device run's loss, grad_norm and weights within 1e-5.
func TestGRPO_ToolsDataParallelEqualsOneDevice(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	withTools := func(s *Setup) {
		set, err := tools.Lookup([]string{"calculator"})
		if err != nil {
			t.Fatal(err)
		}
		s.Decoder = toolLetters{}
		s.Tools = &Tools{Set: set, Format: tools.Hermes, MaxIterations: 2,
			Suffix: func(msgs []chat.Message) ([]int32, error) { return slices.Repeat([]int32{14, 15}, len(msgs)), nil }}
	}
	config := func(n int) *Config {
		c := dpConfig(t, n)
		c.MaxCompletionLength = 12
		return c
	}
	want, w1 := dpRun(t, b, config(1), 0, withTools)
	got, w2 := dpRun(t, b, config(2), 0, withTools)
	calls := 0
	for i := range want {
		g, w := got[i].Scored, want[i].Scored
		calls += w.ToolCalls
		for j := range w.Completions {
			if !slices.Equal(g.Completions[j], w.Completions[j]) || !slices.Equal(g.Mask[j], w.Mask[j]) || len(g.Conversations[j]) != len(w.Conversations[j]) {
				t.Fatalf("step %d completion %d: %v (mask %v), want %v (mask %v)", i+1, j, g.Completions[j], g.Mask[j], w.Completions[j], w.Mask[j])
			}
		}
		if d := math.Abs(got[i].GradNorm - want[i].GradNorm); !(d <= 1e-5*math.Max(want[i].GradNorm, 1e-2)) {
			t.Errorf("step %d grad_norm %.9g, want %.9g", i+1, got[i].GradNorm, want[i].GradNorm)
		}
	}
	if calls == 0 {
		t.Error("no tool call: the test does not exercise the loop")
	}
	closeWeights(t, "tools, 2 devices", w1, w2)
}

// A GRPO checkpoint written on 4 devices resumes on 1 (per_device_train_batch_size × devices
// kept) and ends as the straight one-device run, within 1e-5 of ‖θ‖∞.
func TestGRPO_ResumeOnOtherDeviceCount(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	_, want := dpRun(t, b, dpConfig(t, 1), 0)
	c := dpConfig(t, 4)
	dpRun(t, b, c, 1)
	if _, err := os.Stat(filepath.Join(c.OutputDir, "checkpoint-2", checkpoint.StateName)); err != nil {
		t.Fatalf("the interrupted 4-device run saved no checkpoint-2: %v", err)
	}
	r := dpConfig(t, 1)
	r.OutputDir, r.Resume = c.OutputDir, true
	infos, got := dpRun(t, b, r, 0)
	if len(infos) != 2 || infos[0].Step != 3 {
		t.Fatalf("the resumed run made %d steps from step %v, want steps 3 and 4", len(infos), infos)
	}
	closeWeights(t, "4 devices → 1", want, got)
}

// dpConfig is the data-parallel tests' run on devices devices with a global micro-batch of 8:
// 4 steps, accumulation 2, off-policy (num_iterations 2), a reference model (β 0.04).
func dpConfig(t *testing.T, devices int) *Config {
	c := tinyConfig(t)
	c.MaxSteps, c.Beta, c.NumIterations = 4, 0.04, 2
	c.Devices, c.PerDeviceTrainBatchSize, c.GradientAccumulationSteps = devices, 8/devices, 2
	return resolved(t, c)
}

// dpRun trains c on b (a fresh tiny model, seed 3), interrupted after step stopAt when > 0 (the
// run then stops at the end of its generation batch and saves a checkpoint), and returns every
// step's info and the final weights.
func dpRun(t *testing.T, b backends.Backend, c *Config, stopAt int, edit ...func(*Setup)) ([]StepInfo, map[string][]float32) {
	t.Helper()
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	defer cancel(nil)
	var infos []StepInfo
	m := tinyModel(t, 3)
	s := Setup{Config: c, Backend: b, Model: m, Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(),
		Rewards: []Reward{countReward('b')}, OnStep: func(s StepInfo) {
			infos = append(infos, s)
			if s.Step == stopAt {
				cancel(checkpoint.ErrInterrupted)
			}
		}}
	for _, e := range edit {
		e(&s)
	}
	tr, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.gen.Devices(); got != c.DeviceCount() {
		t.Fatalf("devices %d: the generator runs on %d", c.DeviceCount(), got)
	}
	if _, err := tr.Train(ctx); err != nil && !(stopAt > 0 && errors.Is(err, loop.ErrInterrupted)) {
		t.Fatal(err)
	}
	ws, err := decoder.ExportWeights(m.Ctx, m.Config, "F32")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, w := range ws {
		if out[w.Name], err = w.Float32s(); err != nil {
			t.Fatal(err)
		}
	}
	return infos, out
}

// closeWeights compares two runs' final weights as one vector in the max norm (as the driver's
// own data-parallel test): ‖θ − θ₁‖∞ ≤ 1e-5·‖θ₁‖∞.
func closeWeights(t *testing.T, what string, want, got map[string][]float32) {
	t.Helper()
	norm := 0.0
	for _, x := range want {
		for _, v := range x {
			norm = math.Max(norm, math.Abs(float64(v)))
		}
	}
	if d := maxAbsDiff(got, want); !(d <= 1e-5*norm) {
		t.Errorf("%s: final weights ‖Δθ‖∞ %.3g, %.3g of ‖θ‖∞, want ≤ 1e-5", what, d, d/norm)
	} else {
		t.Logf("%s: final weights ‖Δθ‖∞ %.2g of ‖θ‖∞", what, d/norm)
	}
}

// --fsdp is refused for GRPO: its generation and scoring graphs read the whole weights.
func TestGRPO_FSDPRefused(t *testing.T) {
	c := tinyConfig(t)
	c.Devices, c.FSDP = 2, true
	c.Resolve()
	err := c.Validate()
	if err == nil || err.Error() != "fsdp (--fsdp) is not for grpo, which generates with the whole weights on each device: use --devices N without it (data parallel)" {
		t.Fatalf("Validate: %v", err)
	}
}
