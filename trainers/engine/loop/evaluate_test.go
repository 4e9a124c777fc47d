package loop_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// evalRun trains a fresh copy of the model at dir on train, evaluating on eval as cfg says, and
// returns the metrics lines split into training and eval lines.
func evalRun(t *testing.T, dir, train, eval string, cfg *sft.Config) (trainRecs, evalRecs []runlog.Record) {
	t.Helper()
	m := looptest.Load(t, dir, cfg.BF16)
	tr, err := sft.New(m, looptest.Read(t, train), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := sft.New(m, looptest.Read(t, eval), cfg)
	if err != nil {
		t.Fatal(err)
	}
	recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t), Eval: ev})
	for _, r := range recs {
		if _, ok := r.Metrics["eval_loss"]; ok {
			evalRecs = append(evalRecs, r)
		} else {
			trainRecs = append(trainRecs, r)
		}
	}
	return trainRecs, evalRecs
}

func steps(recs []runlog.Record) []int {
	var out []int
	for _, r := range recs {
		out = append(out, r.Step)
	}
	return out
}

// Eval lines come where HF's DefaultFlowCallback puts them: eval_strategy steps at multiples of
// eval_steps (default logging_steps) and not at a last step that is not one; epoch at the end of
// each pass and at max_steps inside a pass (on_epoch_end still runs); eval_on_start at step 0;
// eval_strategy no: never, even with an eval set. 20 rows, batch 4 × accumulation 2: passes end
// at steps 3 and 6 (8 + 8 + 4 rows).
func TestEval_Schedule(t *testing.T) {
	dir := looptest.Model(t)
	train := looptest.MultFile(t, mult.SFT, 20, 3)
	eval := looptest.MultFile(t, mult.SFT, 6, 4)
	cases := []struct {
		strategy  string
		evalSteps int
		onStart   bool
		maxSteps  int
		want      []int
	}{
		{"steps", 0, false, 5, []int{2, 4}},
		{"steps", 3, true, 5, []int{0, 3}},
		{"epoch", 0, false, 5, []int{3, 5}},
		{"epoch", 0, false, 6, []int{3, 6}},
		{"no", 0, false, 3, nil},
		{"no", 0, true, 3, []int{0}},
	}
	for _, c := range cases {
		cfg := sft.DefaultConfig()
		looptest.Common(t, &cfg.Training, 1e-3, 4, 2, c.maxSteps)
		cfg.OutputDir = filepath.Join(t.TempDir(), "out")
		cfg.LoggingSteps, cfg.EvalStrategy, cfg.EvalSteps, cfg.EvalOnStart = 2, c.strategy, c.evalSteps, c.onStart
		cfg.EvalDataset, cfg.PerDeviceEvalBatchSize = eval, 4
		trainRecs, evalRecs := evalRun(t, dir, train, eval, cfg)
		if got := steps(evalRecs); !slices.Equal(got, c.want) {
			t.Errorf("%s eval_steps %d on_start %v max_steps %d: eval at steps %v, want %v", c.strategy, c.evalSteps, c.onStart, c.maxSteps, got, c.want)
		}
		if got, want := steps(trainRecs), logSteps(c.maxSteps, 2); !slices.Equal(got, want) {
			t.Errorf("%s: train lines at %v, want %v", c.strategy, got, want)
		}
		for _, r := range evalRecs {
			for _, k := range []string{"eval_loss", "eval_mean_token_accuracy", "eval_entropy", "eval_num_tokens", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second"} {
				if _, ok := r.Metrics[k]; !ok {
					t.Errorf("%s: eval line at step %d lacks %s: %v", c.strategy, r.Step, k, r.Metrics)
				}
			}
			for k := range r.Metrics {
				if !strings.HasPrefix(k, "eval_") {
					t.Errorf("%s: eval line at step %d has %s", c.strategy, r.Step, k)
				}
			}
		}
		if c.strategy == "epoch" && evalRecs[0].Epoch != 1 {
			t.Errorf("epoch eval at step 3: epoch %v, want 1", evalRecs[0].Epoch)
		}
	}
}

func logSteps(total, every int) []int {
	var out []int
	for s := 1; s <= total; s++ {
		if s%every == 0 || s == total {
			out = append(out, s)
		}
	}
	return out
}

// Evaluation reads the weights and writes nothing back: training with an evaluation after every
// step (and on start) leaves bit-identical weights, optimizer state and training lines.
func TestEval_DoesNotChangeTraining(t *testing.T) {
	dir := looptest.Model(t)
	train := looptest.MultFile(t, mult.SFT, 20, 3)
	eval := looptest.MultFile(t, mult.SFT, 6, 4)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 4, 2, 4)
	cfg.SaveSteps = 4
	plain := cfg.OutputDir
	plainTrain, plainEval := evalRun(t, dir, train, eval, cfg) // eval_strategy "no": no evaluation
	if len(plainEval) != 0 {
		t.Fatalf("eval_strategy no wrote eval lines: %v", plainEval)
	}
	cfg.OutputDir = filepath.Join(t.TempDir(), "eval")
	cfg.EvalDataset, cfg.EvalStrategy, cfg.EvalSteps, cfg.EvalOnStart, cfg.PerDeviceEvalBatchSize = eval, "steps", 1, true, 4
	withTrain, withEval := evalRun(t, dir, train, eval, cfg)
	if got := steps(withEval); !slices.Equal(got, []int{0, 1, 2, 3, 4}) {
		t.Fatalf("eval at steps %v, want 0..4", got)
	}
	for _, name := range []string{"model.safetensors", "checkpoint-4/optimizer.safetensors", "checkpoint-4/model.safetensors"} {
		if !bytes.Equal(readFile(t, filepath.Join(plain, name)), readFile(t, filepath.Join(cfg.OutputDir, name))) {
			t.Errorf("%s differs with evaluation", name)
		}
	}
	for i := range plainTrain {
		a, _ := plainTrain[i].MarshalJSON()
		b, _ := withTrain[i].MarshalJSON()
		if !bytes.Equal(a, b) {
			t.Errorf("training line %d differs with evaluation:\n%s\n%s", i, a, b)
		}
	}
	if !(withEval[4].Metrics["eval_loss"] < withEval[0].Metrics["eval_loss"]) {
		t.Errorf("eval_loss %v → %v: want training to lower it", withEval[0].Metrics["eval_loss"], withEval[4].Metrics["eval_loss"])
	}
	if got, want := withEval[4].Metrics["eval_num_tokens"], withTrain[len(withTrain)-1].Metrics["num_tokens"]; got != want || withEval[0].Metrics["eval_num_tokens"] != 0 {
		t.Errorf("eval_num_tokens %v at step 4, want the training count %v (TRL), and 0 on start", got, want)
	}
}
