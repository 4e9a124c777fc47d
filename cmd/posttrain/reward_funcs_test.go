package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/posttrain/posttrain/apps/demo"
	"github.com/posttrain/posttrain/data/extreward"
)

// rewardsPy is a reward file written for TRL's GRPOTrainer: the quick start's reward_len, and one
// that reads a dataset column and trainer_state and raises ("judge unavailable") from the step
// written in the file fail_at beside it, if there is one.
const rewardsPy = `import os

def reward_len(completions, **kwargs):
    print("scored", len(completions))
    return [-abs(20 - len(c[0]["content"])) for c in completions]

def answer_len(prompts, completions, completion_ids, answer, trainer_state, **kwargs):
    marker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fail_at")
    if os.path.exists(marker) and trainer_state.global_step >= int(open(marker).read()):
        raise RuntimeError("judge unavailable")
    assert prompts[0][-1]["role"] == "user" and len(completion_ids) == len(completions)
    return [float(len(a)) + len(ids) / 100 for a, ids in zip(answer, completion_ids)]
`

func needPython3(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not on PATH")
		}
		t.Skip("python3 is not on PATH")
	}
}

// pythonRewardRun is a Python reward test's directory, with the tiny model and rewardsPy written
// there (it skips where python3 is missing, but in CI).
func pythonRewardRun(t *testing.T) (dir, model, rewardsFile string) {
	t.Helper()
	needPython3(t)
	dir = t.TempDir()
	model = tinyGRPOModel(t, dir)
	rewardsFile = filepath.Join(dir, "rewards.py")
	if err := os.WriteFile(rewardsFile, []byte(rewardsPy), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, model, rewardsFile
}

func tinyGRPOModel(t *testing.T, dir string) string {
	t.Helper()
	model, err := demo.WriteBase(dir, demo.ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return model
}

func grpoArgs(model, out string, extra ...string) []string {
	return append([]string{"grpo", "--model", model, "--dataset", "mult", "--output-dir", out, "--max-steps", "3",
		"--logging-steps", "1", "--num-generations", "4", "--per-device-train-batch-size", "8", "--max-completion-length", "6"}, extra...)
}

// completionLines reads a run's completions.jsonl.
func completionLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, m)
	}
	return lines
}

// A Python reward file written for TRL runs unchanged through --reward-funcs FILE.py:FUNC: each
// function logs under its __name__, its rewards are the ones completions.jsonl shows for the
// completion texts, and its prints do not disturb the run.
func TestGRPO_PythonRewardFuncs(t *testing.T) {
	dir, model, py := pythonRewardRun(t)
	out := filepath.Join(dir, "run")
	if _, err := runCLI(t, grpoArgs(model, out, "--reward-funcs", py+":reward_len", "--reward-funcs", py+":answer_len",
		"--reward-weights", "1,0.5")...); err != nil {
		t.Fatal(err)
	}
	recs := metricsLines(t, out)
	if len(recs) == 0 {
		t.Fatal("no metrics")
	}
	for _, k := range []string{"rewards/reward_len/mean", "rewards/reward_len/std", "rewards/answer_len/mean"} {
		if _, ok := recs[0].Metrics[k]; !ok {
			t.Errorf("metrics.jsonl lacks %s: %v", k, recs[0].Metrics)
		}
	}
	lines := completionLines(t, out)
	if len(lines) == 0 {
		t.Fatal("no completions logged")
	}
	for _, l := range lines {
		c := l["completion"].(string)
		rw := l["rewards"].(map[string]any)
		if got, want := rw["reward_len"].(float64), -math.Abs(20-float64(utf8.RuneCountInString(c))); got != want { // Python's len
			t.Errorf("completion %q: reward_len %g, want %g", c, got, want)
		}
		if a := rw["answer_len"].(float64); a < 1 || a > 6 {
			t.Errorf("completion %q: answer_len %g", c, a)
		}
	}
}

// A reward that raises stops the run with one line naming the function, the step (as
// metrics.jsonl numbers it) and the checkpoint saved of the step before; once fixed, --resume
// ends where the uninterrupted run does, bit for bit.
func TestGRPO_RewardFailureSavesAndResumes(t *testing.T) {
	dir, model, py := pythonRewardRun(t)
	// beta > 0: the rewards run beside the reference pass, and fail there.
	funcs := []string{"--reward-funcs", py + ":reward_len", "--reward-funcs", py + ":answer_len", "--beta", "0.04"}
	straight := filepath.Join(dir, "straight")
	if _, err := runCLI(t, grpoArgs(model, straight, funcs...)...); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, "fail_at")
	if err := os.WriteFile(marker, []byte("2"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	_, err := runCLI(t, grpoArgs(model, out, funcs...)...)
	want := "grpo: step 3: reward answer_len: raised RuntimeError: judge unavailable (" + py + ":10): training stopped; saved " +
		filepath.Join(out, "checkpoint-2") + ": continue with --resume once fixed"
	if err == nil || !strings.HasSuffix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("error %v\nwant one line ending %q", err, want)
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, grpoArgs(model, out, append(funcs, "--resume")...)...); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(straight, "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(out, "model.safetensors"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("the resumed run's model differs from the uninterrupted run's (%d and %d bytes)", len(a), len(b))
	}
}

// --reward-url posts each batch to a reward server and takes its {"rewards": [...]}.
func TestGRPO_RewardURL(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Completions [][]map[string]string `json:"completions"`
			Query       []string              `json:"query"`
			Answer      []string              `json:"answer"`
		}
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		calls++
		rewards := make([]float64, len(req.Completions))
		for i, c := range req.Completions {
			if !strings.HasSuffix(req.Query[i], c[0]["content"]) || req.Answer[i] == "" {
				http.Error(w, "query does not end with the completion", http.StatusBadRequest)
				return
			}
			rewards[i] = float64(utf8.RuneCountInString(c[0]["content"]))
		}
		json.NewEncoder(w).Encode(map[string]any{"rewards": rewards})
	}))
	defer srv.Close()
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	out := filepath.Join(dir, "run")
	if _, err := runCLI(t, grpoArgs(model, out, "--reward-url", srv.URL+"/score", "--max-steps", "2")...); err != nil {
		t.Fatal(err)
	}
	if calls != 3 { // the check before training, then one per step
		t.Errorf("%d calls to the server, want 3", calls)
	}
	for _, l := range completionLines(t, out) {
		if got := l["rewards"].(map[string]any)["score"].(float64); got != float64(utf8.RuneCountInString(l["completion"].(string))) {
			t.Errorf("completion %q: reward %g", l["completion"], got)
		}
	}
}

// TRL's own reward functions by the names its grpo.py script knows them (Go, no Python needed).
func TestGRPO_TRLBuiltinRewards(t *testing.T) {
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	out := filepath.Join(dir, "run")
	if _, err := runCLI(t, grpoArgs(model, out, "--reward-funcs", "think_format_reward", "--reward-funcs", "get_soft_overlong_punishment", "--max-steps", "1",
		"--per-device-train-batch-size", "72")...); err != nil {
		t.Fatal(err)
	}
	if n := len(completionLines(t, out)); n != 72 {
		t.Errorf("completions.jsonl has %d lines for the step's 72 completions", n)
	}
	recs := metricsLines(t, out)
	for _, k := range []string{"rewards/think_format_reward/mean", "rewards/get_soft_overlong_punishment/mean"} {
		if v, ok := recs[0].Metrics[k]; !ok || v != 0 { // no <think> from the tiny model; 6 tokens ≪ 1024
			t.Errorf("%s = %v (logged: %v)", k, v, ok)
		}
	}
}

// The Go accuracy_reward (TRL's name) on a dataset with a solution column: a run logs
// rewards/accuracy_reward/mean, std and undecided, and completions.jsonl shows its reward of each
// completion as MathAccuracy gives it; a dataset without a solution column stops the run before
// anything is generated, naming the dataset, the function and the column.
func TestGRPO_AccuracyRewardBuiltin(t *testing.T) {
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	ds := filepath.Join(dir, "math.jsonl")
	if err := os.WriteFile(ds, []byte(`{"prompt": "1+1=", "solution": "$2$"}`+"\n"+`{"prompt": "2+2=", "solution": "4"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run")
	if _, err := runCLI(t, "grpo", "--model", model, "--dataset", ds, "--reward-funcs", "accuracy_reward", "--output-dir", out,
		"--max-steps", "1", "--logging-steps", "1", "--num-generations", "2", "--per-device-train-batch-size", "4", "--max-completion-length", "4"); err != nil {
		t.Fatal(err)
	}
	recs := metricsLines(t, out)
	for _, k := range []string{"rewards/accuracy_reward/mean", "rewards/accuracy_reward/std", "rewards/accuracy_reward/undecided"} {
		if _, ok := recs[0].Metrics[k]; !ok {
			t.Errorf("no %s in %v", k, recs[0].Metrics)
		}
	}
	lines := completionLines(t, out)
	if len(lines) != 4 {
		t.Fatalf("%d completions logged, want 4", len(lines))
	}
	for _, l := range lines {
		sol := map[string]string{"1+1=": "$2$", "2+2=": "4"}[l["prompt"].(string)]
		text, _ := l["completion"].(string)
		want := extreward.MathAccuracy(sol, text)
		rewards, _ := l["rewards"].(map[string]any)
		if got, ok := rewards["accuracy_reward"].(float64); !ok && !math.IsNaN(want) || ok && got != want {
			t.Errorf("completion %q of %q: logged %v, MathAccuracy %v", text, l["prompt"], rewards["accuracy_reward"], want)
		}
	}

	noSol := filepath.Join(dir, "nosol.jsonl")
	if err := os.WriteFile(noSol, []byte(`{"prompt": "1+1=", "answer": "2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(dir, "run2")
	_, err := runCLI(t, "grpo", "--model", model, "--dataset", noSol, "--reward-funcs", "accuracy_reward", "--output-dir", out2,
		"--max-steps", "1", "--num-generations", "2", "--per-device-train-batch-size", "2", "--max-completion-length", "2")
	if err == nil || !strings.Contains(err.Error(), noSol+": reward accuracy_reward") || !strings.Contains(err.Error(), "solution column") {
		t.Fatalf("want an error naming %s, accuracy_reward and the solution column, got %v", noSol, err)
	}
	if _, err := os.Stat(filepath.Join(out2, "completions.jsonl")); err == nil {
		t.Error("something was generated before the check")
	}
}
