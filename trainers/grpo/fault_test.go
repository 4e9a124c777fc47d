package grpo

import (
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// grpoFaultEnv carries "OUT PHASE K" to the child process of TestGRPOFault_KillThenResume.
const grpoFaultEnv = "POSTTRAIN_GRPO_FAULT_HELPER"

// faultRun is the GRPO run the fault test kills: 4 steps, a checkpoint every step, 2 kept, a
// reference synced every 2 steps (so checkpoints carry reference.safetensors and GRPO's state).
func faultRun(t *testing.T, out string, resume, overwrite bool) error {
	t.Helper()
	c := syncConfig(t, 2)
	c.OutputDir, c.MaxSteps, c.SaveSteps, c.SaveTotalLimit = out, 4, 1, 2
	c.Resume, c.OverwriteOutputDir = resume, overwrite
	tr, err := New(Setup{Config: resolved(t, c), Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: letters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{countReward('c')}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Train(stdctx.Background())
	return err
}

// TestGRPOFaultHelper is the child process of TestGRPOFault_KillThenResume; it does nothing in a
// normal test run.
func TestGRPOFaultHelper(t *testing.T) {
	var out, phase string
	var k int
	if _, err := fmt.Sscan(os.Getenv(grpoFaultEnv), &out, &phase, &k); err != nil {
		t.Skip("the child process of TestGRPOFault_KillThenResume")
	}
	n := 0
	checkpoint.Fault = func(p string) {
		if p == phase {
			if n++; n == k {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way
			}
		}
	}
	if err := faultRun(t, out, false, false); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("the run ended without reaching call %d of phase %s (%d calls)", k, phase, n)
}

// GRPO's checkpoints carry their own state (the prompt position, the generation round, the
// synced reference weights): a GRPO run killed (SIGKILL) at representative phases of its saves,
// rotations and final-model write leaves only complete visible checkpoints, and resumed with
// --resume ends as an uninterrupted run: the same files, byte-identical weights, optimizer state,
// reference and completions.jsonl, the same trainer_state.json and metrics lines (apart from
// timings). trainers/engine/loop's TestFault_KillAnywhereThenResume covers every phase on an SFT run;
// POSTTRAIN_FAULT_FULL=1 kills this one at every call of every phase too.
func TestGRPOFault_KillThenResume(t *testing.T) {
	ref := filepath.Join(t.TempDir(), "ref")
	var trace []string
	checkpoint.Fault = func(phase string) { trace = append(trace, phase) }
	err := faultRun(t, ref, false, false)
	checkpoint.Fault = func(string) {}
	if err != nil {
		t.Fatal(err)
	}
	type point struct {
		phase string
		k     int
	}
	points := []point{
		{checkpoint.PhaseSaveStateWritten, 2}, // checkpoint-2, the first with a reference
		{checkpoint.PhaseSaveRenamed, 3},      // checkpoint-3 in place, checkpoint-1 not yet pruned
		{checkpoint.PhasePruneRenamed, 2},     // checkpoint-2 being rotated out by checkpoint-4
		{checkpoint.PhaseModelRenamed, 1},     // the final model half replaced
	}
	if os.Getenv("POSTTRAIN_FAULT_FULL") != "" { // every call of every phase
		points = nil
		count := map[string]int{}
		for _, p := range trace {
			count[p]++
			points = append(points, point{p, count[p]})
		}
	}
	for _, p := range points {
		t.Run(fmt.Sprintf("%s#%d", p.phase, p.k), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command(os.Args[0], "-test.run=^TestGRPOFaultHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %s %d", grpoFaultEnv, out, p.phase, p.k), "TMPDIR="+t.TempDir())
			log, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled() || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the run to kill was not killed (%v):\n%s", err, log)
			}
			cps, err := checkpoint.List(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, cp := range cps {
				if _, err := checkpoint.Load(cp.Dir); err != nil {
					t.Errorf("visible %s does not load: %v", cp.Dir, err)
				}
			}
			latest, err := checkpoint.Latest(out)
			switch {
			case len(cps) == 0 && !errors.Is(err, checkpoint.ErrNoCheckpoint):
				t.Errorf("no checkpoint, but Latest says %q, %v", latest, err)
			case len(cps) > 0 && (err != nil || latest != cps[len(cps)-1].Dir):
				t.Errorf("Latest %q (%v), want %s", latest, err, cps[len(cps)-1].Dir)
			}
			if p.phase == checkpoint.PhaseModelRenamed || p.phase == checkpoint.PhaseModelMarked {
				if _, err := safetensors.ReadModelDir(out); err == nil || !strings.Contains(err.Error(), safetensors.IncompleteMarker) {
					t.Errorf("loading the half-written model: %v, want an error naming %s", err, safetensors.IncompleteMarker)
				}
			}
			// Killed before its first checkpoint, the run starts again (--overwrite-output-dir).
			if err := faultRun(t, out, len(cps) > 0, len(cps) == 0); err != nil {
				t.Fatalf("resume after the kill: %v", err)
			}
			sameGRPORun(t, ref, out)
		})
	}
}

// sameGRPORun fails t unless the GRPO run in got ended as the one in want.
func sameGRPORun(t *testing.T, want, got string) {
	t.Helper()
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	if g, w := names(got), names(want); !slices.Equal(g, w) {
		t.Errorf("the resumed run left %v, the uninterrupted run %v", g, w)
	}
	for _, name := range []string{"model.safetensors", runlog.CompletionsName, "checkpoint-4/optimizer.safetensors", "checkpoint-4/" + ReferenceName} {
		a, errA := os.ReadFile(filepath.Join(want, name))
		b, errB := os.ReadFile(filepath.Join(got, name))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs from the uninterrupted run's (%v, %v)", name, errA, errB)
		}
	}
	looptest.SameMetrics(t, filepath.Join(want, runlog.MetricsName), filepath.Join(got, runlog.MetricsName))
	// trainer_state.json: the log lines hold timings, compared apart.
	load := func(dir string) *checkpoint.State {
		st, err := checkpoint.Load(filepath.Join(dir, "checkpoint-4"))
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sw, sg := load(want), load(got)
	history := func(st *checkpoint.State) string {
		path := filepath.Join(t.TempDir(), "log_history.jsonl")
		var b []byte
		for _, line := range st.LogHistory {
			b = append(append(b, line...), '\n')
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		st.LogHistory = nil
		return path
	}
	looptest.SameMetrics(t, history(sw), history(sg))
	if !reflect.DeepEqual(sw, sg) {
		t.Errorf("checkpoint-4/trainer_state.json differs:\nwant %+v\ngot  %+v", sw, sg)
	}
}
