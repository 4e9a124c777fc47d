package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/apps/bench"
)

// The workloads run end to end on the tiny fixture with the pure-Go backend and print their JSON.
func TestBench_WorkloadsOnTinyFixture(t *testing.T) {
	model := tinyFixture + "/model"
	for _, c := range []struct {
		args []string
		keys []string
	}{
		{[]string{"bench", "decode", "--batch", "1,3", "--prompt-len", "5", "--new-tokens", "4"}, []string{"runs"}},
		{[]string{"bench", "sft", "--batch", "2", "--seq-len", "12", "--steps", "2", "--peak-tflops", "1"}, []string{"tokens_per_s", "mfu"}},
		{[]string{"bench", "sample", "--rows", "2", "--new-tokens", "5"}, []string{"cases", "tokens_equal"}},
		{[]string{"bench", "grpo", "--prompts", "2", "--generations", "3", "--prompt-len", "4", "--new-tokens", "3", "--micro-batch", "3"},
			[]string{"step_s", "generate_s", "train_s"}},
	} {
		args := append(c.args, "--model", model, "--dtype", "float32", "--backend", "go")
		out, err := runCLI(t, args...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("%v: output is not JSON: %v\n%s", c.args, err, out)
		}
		if m["params"].(float64) != 158272 || m["flops_per_token"].(float64) != 6*158272 {
			t.Errorf("%v: params %v, flops/token %v", c.args, m["params"], m["flops_per_token"])
		}
		for _, k := range c.keys {
			if m[k] == nil {
				t.Errorf("%v: no %q in %s", c.args, k, out)
			}
		}
		if c.args[1] == "decode" {
			runs := m["runs"].([]any)
			if len(runs) != 2 || runs[1].(map[string]any)["tokens"].(float64) != 3*4 {
				t.Errorf("decode runs: %v", runs)
			}
		}
		if c.args[1] == "sample" && (m["tokens"].(float64) != 5*2*5 || m["tokens_equal"] != m["tokens"]) {
			t.Errorf("sample: %v of %v tokens equal, want 50 of 50 (5 variants × 2 rows × 5)", m["tokens_equal"], m["tokens"])
		}
		if c.args[1] == "grpo" && m["updates"].(float64) != 2 {
			t.Errorf("grpo: %v updates, want 2 micro-batches of 3", m["updates"])
		}
	}
}

func TestBench_Inputs(t *testing.T) {
	out, err := runCLI(t, "bench", "inputs", "--vocab", "50", "--rows", "4", "--len", "16", "--seed", "3")
	if err != nil {
		t.Fatal(err)
	}
	var b bench.Batch
	if err := json.Unmarshal([]byte(out), &b); err != nil {
		t.Fatal(err)
	}
	if len(b.InputIDs) != 4 || b.CompletionStart != 4 {
		t.Fatalf("got %d rows, completion_start %d", len(b.InputIDs), b.CompletionStart)
	}
	// Row 0 full, row 1 left-padded, row 2 right-padded, row 3 left-padded more.
	if b.AttentionMask[0][0] != 1 || b.AttentionMask[1][0] != 0 || b.AttentionMask[1][15] != 1 ||
		b.AttentionMask[2][0] != 1 || b.AttentionMask[2][15] != 0 || b.AttentionMask[3][5] != 0 {
		t.Errorf("masks: %v", b.AttentionMask)
	}
	for r, row := range b.InputIDs {
		for _, id := range row {
			if id < 0 || id >= 50 {
				t.Fatalf("row %d: id %d outside the vocabulary", r, id)
			}
		}
	}
}

// writeStages writes stage records and their results into dir and returns the stages file.
func writeStages(t *testing.T, dir string, stages map[string]string, order []string, status map[string]string) string {
	t.Helper()
	var lines []string
	for _, name := range order {
		st := status[name]
		if st == "" {
			st = "ok"
		}
		rec := bench.Stage{Name: name, Status: st, Seconds: 1.5}
		if res, ok := stages[name]; ok {
			rec.Result = filepath.Join(dir, name+".json")
			if err := os.WriteFile(rec.Result, []byte(res), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := json.Marshal(rec)
		lines = append(lines, string(b))
	}
	path := filepath.Join(dir, "stages.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestBench_Report(t *testing.T) {
	dir := t.TempDir()
	results := map[string]string{
		"score_go_float32":  `{"token_positions":[[1,2],[3]],"token_logprobs":[[-1.0,-2.0],[-3.0]],"loss":2.0}`,
		"score_hf_float32":  `{"token_positions":[[1,2],[3]],"token_logprobs":[[-1.0005,-2.0],[-2.999]],"loss":2.0002}`,
		"score_go_bfloat16": `{"token_positions":[[1,2],[3]],"token_logprobs":[[-1.0,-2.0],[-3.0]],"loss":2.0}`,
		"score_hf_bfloat16": `{"token_positions":[[1,2],[3]],"token_logprobs":[[-1.5,-2.0],[-3.0]],"loss":2.1}`,
		"decode_go":         `{"runs":[{"batch":1,"tokens_per_second":100},{"batch":64,"tokens_per_second":3000}]}`,
		"decode_hf":         `{"runs":[{"batch":1,"tokens_per_second":200},{"batch":64,"tokens_per_second":1500}]}`,
		"sft_go":            `{"batch":8,"seq_len":512,"tokens_per_s":5000,"mfu":0.1}`,
		"sft_hf":            `{"batch":8,"seq_len":512,"tokens_per_s":10000,"mfu":0.2}`,
		"grpo_go":           `{"prompts":64,"generations":8,"new_tokens":64,"step_s":4,"generate_s":3,"train_s":1}`,
		"trainer_grpo":      `{"metrics":[{"step":1,"loss":0.5},{"step":2,"loss":0.25,"timing_s/update":1.5}]}`,
	}
	order := []string{"probe", "score_go_float32", "score_hf_float32", "score_go_bfloat16", "score_hf_bfloat16",
		"decode_go", "decode_hf", "sft_go", "sft_hf", "grpo_go", "grpo_hf", "trainer_grpo"}
	stages := writeStages(t, dir, results, order, map[string]string{"grpo_hf": "skipped"})
	outPath := filepath.Join(dir, "out", "report.json")
	out, err := runCLI(t, "bench", "report", "--stages", stages, "--out", outPath, "--info", "mode=test", "--tol-bfloat16", "0.1", "--strict")
	if err == nil || !strings.Contains(out, "logprob_check_bfloat16") {
		t.Fatalf("a bfloat16 difference of 0.5 must fail the strict report: err %v\n%s", err, out)
	}
	data, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	f32, b16 := rep.LogProbs["float32"], rep.LogProbs["bfloat16"]
	if f32 == nil || !f32.Pass || math.Abs(f32.MaxAbsDiff-1e-3) > 1e-9 || f32.Tokens != 3 || b16 == nil || b16.Pass || b16.MaxAbsDiff != 0.5 {
		t.Errorf("log-prob checks: float32 %+v, bfloat16 %+v", f32, b16)
	}
	if rep.OK || rep.Info["mode"] != "test" || len(rep.Stages) != len(order) {
		t.Errorf("ok %v, info %v, %d stages", rep.OK, rep.Info, len(rep.Stages))
	}
	ratios := map[string]float64{}
	for _, r := range rep.Throughput {
		if r.Ratio != nil {
			ratios[r.Workload] = *r.Ratio
		}
	}
	want := map[string]float64{"decode batch 1": 0.5, "decode batch 64": 2, "sft step 8×512": 0.5}
	for k, v := range want {
		if math.Abs(ratios[k]-v) > 1e-12 {
			t.Errorf("%s: ratio %v, want %v (all: %v)", k, ratios[k], v, ratios)
		}
	}
	if _, ok := ratios["grpo step 64×8×64"]; ok {
		t.Errorf("grpo has no PyTorch side, so no ratio")
	}
	for _, s := range []string{"decode batch 64", "2.00×", "MFU 10.0% | 20.0%", "result: NOT ok", "step 2, loss 0.25, timing_s/update 1.5"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}

	// A failed stage fails the report; a skipped one does not.
	stages = writeStages(t, dir, map[string]string{"decode_go": results["decode_go"]}, []string{"decode_go", "sft_go", "sft_hf"},
		map[string]string{"sft_go": "failed", "sft_hf": "skipped"})
	if _, err := runCLI(t, "bench", "report", "--stages", stages, "--out", outPath, "--strict"); err == nil {
		t.Error("a failed stage must fail the strict report")
	}
	stages = writeStages(t, dir, map[string]string{"decode_go": results["decode_go"]}, []string{"decode_go", "sft_hf"},
		map[string]string{"sft_hf": "skipped"})
	if out, err := runCLI(t, "bench", "report", "--stages", stages, "--out", outPath, "--strict"); err != nil || !strings.Contains(out, "result: ok") {
		t.Errorf("skipped stages only: err %v\n%s", err, out)
	}
}

// The probe's log-probs are checked against an expected score output when one is given.
func TestBench_ReportProbeCheck(t *testing.T) {
	dir := t.TempDir()
	expected := filepath.Join(dir, "expected.json")
	if err := os.WriteFile(expected, []byte(`{"token_positions":[[7,8]],"token_logprobs":[[-6.9,-7.0]],"loss":6.95}`), 0o644); err != nil {
		t.Fatal(err)
	}
	outPath := filepath.Join(dir, "report.json")
	for _, c := range []struct {
		probe string
		pass  bool
	}{
		{`{"token_positions":[[7,8]],"token_logprobs":[[-6.90001,-7.0]],"loss":6.95}`, true},
		{`{"token_positions":[[7,8]],"token_logprobs":[[-6.901,-7.0]],"loss":6.95}`, false},
		{`{"token_positions":[[6,8]],"token_logprobs":[[-6.9,-7.0]],"loss":6.95}`, false},
	} {
		stages := writeStages(t, dir, map[string]string{"probe": c.probe}, []string{"probe"}, nil)
		out, err := runCLI(t, "bench", "report", "--stages", stages, "--out", outPath, "--probe-expected", expected, "--strict")
		if (err == nil) != c.pass || !strings.Contains(out, bench.ProbeCheck) {
			t.Errorf("probe %s: err %v, want pass %v\n%s", c.probe, err, c.pass, out)
		}
	}
}

// bench parity on the tiny fixture: its first loss is the fixture's HF float64 loss (the probe's
// 9.692274, before any update), later ones fall; the report compares the two sides step by step.
func TestBench_Parity(t *testing.T) {
	out, err := runCLI(t, "bench", "parity", "--model", tinyFixture+"/model", "--input", tinyFixture+"/inputs/left_pad.json",
		"--backend", "go", "--steps", "3")
	if err != nil {
		t.Fatal(err)
	}
	var res bench.ParityResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	want := readFixtureLoss(t)
	if len(res.Losses) != 3 || len(res.GradNorms) != 3 || math.Abs(res.Losses[0]-want) > 1e-5 || !(res.Losses[2] < res.Losses[0]) {
		t.Errorf("losses %v (first want %v, then falling), grad norms %v", res.Losses, want, res.GradNorms)
	}

	dir := t.TempDir()
	outPath := filepath.Join(dir, "report.json")
	for _, c := range []struct {
		ref  string
		pass bool
	}{
		{`{"losses":[2.0,1.5],"grad_norms":[10,9]}`, true},
		{`{"losses":[2.0,1.5003],"grad_norms":[10,9]}`, true}, // 2e-4 relative
		{`{"losses":[2.0,1.52],"grad_norms":[10,9]}`, false},  // 1.3e-2 relative
		{`{"losses":[2.0],"grad_norms":[10]}`, false},
	} {
		stages := writeStages(t, dir, map[string]string{"parity_go": `{"losses":[2.0,1.5],"grad_norms":[10,9]}`, "parity_hf": c.ref},
			[]string{"parity_go", "parity_hf"}, nil)
		out, err := runCLI(t, "bench", "report", "--stages", stages, "--out", outPath, "--tol-float32", "2e-3", "--strict")
		if (err == nil) != c.pass || !strings.Contains(out, "training parity") {
			t.Errorf("pytorch %s: err %v, want pass %v\n%s", c.ref, err, c.pass, out)
		}
	}
}

// readFixtureLoss is the loss of the tiny fixture's left_pad batch in its float64 HF reference.
func readFixtureLoss(t *testing.T) float64 {
	t.Helper()
	data, err := os.ReadFile(tinyFixture + "/expected/left_pad.float64.json")
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Loss float64 `json:"loss"`
	}
	if err := json.Unmarshal(data, &e); err != nil || e.Loss == 0 {
		t.Fatalf("fixture loss: %v (%v)", e.Loss, err)
	}
	return e.Loss
}

// --info values keep their commas (nvidia-smi's CSV line used to split into bad KEY=VALUE pairs,
// a usage error that lost the whole report); the compile time of a stage is printed apart from its
// run time; --stopped fails the report and says why.
func TestBench_ReportInfoCommasCompileTimeAndStop(t *testing.T) {
	dir := t.TempDir()
	compile, graphs := 0.5, 3
	rec := bench.Stage{Name: "backend", Status: "failed", RC: 1, Seconds: 2, CompileS: &compile, Graphs: &graphs, Note: "no plugin"}
	b, _ := json.Marshal(rec)
	stages := filepath.Join(dir, "stages.jsonl")
	if err := os.WriteFile(stages, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "bench", "report", "--stages", stages, "--out", filepath.Join(dir, "r.json"),
		"--info", "gpu=NVIDIA H200, 580.159.03, 143771 MiB", "--info", "ptxas=/x/ptxas (Cuda compilation tools, release 13.0, V13.0.88)",
		"--stopped", "backend failed: no plugin", "--strict")
	if err == nil {
		t.Fatal("a stopped run must fail the strict report")
	}
	for _, s := range []string{"gpu: NVIDIA H200, 580.159.03, 143771 MiB", "ptxas: /x/ptxas (Cuda compilation tools, release 13.0, V13.0.88)",
		"compile    0.5s (  3 graphs), run    1.5s", "stopped after the first stages, nothing else ran: backend failed: no plugin", "result: NOT ok"} {
		if !strings.Contains(out, s) {
			t.Errorf("summary lacks %q:\n%s", s, out)
		}
	}
}

// bench memory plans a step on XLA from shapes and prints XLA's sizes; it refuses a backend
// without memory plans and a method it does not plan, naming them.
func TestBench_Memory(t *testing.T) {
	if _, err := runCLI(t, "bench", "memory", "--preset", "tiny", "--backend", "go"); err == nil || !strings.Contains(err.Error(), "has no memory plans") {
		t.Errorf("pure-Go backend: %v", err)
	}
	if _, err := runCLI(t, "bench", "memory", "--preset", "tiny", "--method", "orpo"); err == nil || !strings.Contains(err.Error(), `--method "orpo" is not planned`) {
		t.Errorf("orpo: %v", err)
	}
	out, err := runCLI(t, "bench", "memory", "--preset", "tiny", "--batch", "2", "--seq-len", "16", "--backend", "xla:cpu", "--json")
	if err != nil {
		if strings.Contains(err.Error(), "plugin") {
			t.Skipf("needs the XLA CPU plugin (make xla-cpu): %v", err)
		}
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	for _, k := range []string{"argument_bytes", "output_bytes", "temp_bytes", "alias_bytes", "state_bytes", "total_bytes"} {
		if v, ok := m[k].(float64); !ok || v <= 0 {
			t.Errorf("%s = %v in %s", k, m[k], out)
		}
	}
	if m["gradient_checkpointing"] != true || m["state_bytes"].(float64) != 18*158272 {
		t.Errorf("checkpointing %v, state %v bytes (want 18 a parameter of 158,272)", m["gradient_checkpointing"], m["state_bytes"])
	}
}
