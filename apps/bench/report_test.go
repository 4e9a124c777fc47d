package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeStages writes ok stage records with the given results into dir and returns the stages file.
func writeStages(t *testing.T, dir string, order []string, results map[string]string) string {
	t.Helper()
	var lines []string
	for _, name := range order {
		rec := Stage{Name: name, Status: "ok", Seconds: 1}
		if res, ok := results[name]; ok {
			rec.Result = filepath.Join(dir, name+".json")
			if err := os.WriteFile(rec.Result, []byte(res), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		b, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	path := filepath.Join(dir, "stages.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The PyTorch side's outputs (scripts/gpu/hf_reference.py: the same keys plus its own, e.g.
// attn_implementation and a null peak_memory_gib) decode into the workloads' result types for the
// throughput table and the checks, while report.json keeps every stage's output as it was written.
func TestBuildReport_DecodesBothSidesAndKeepsOutputsVerbatim(t *testing.T) {
	dir := t.TempDir()
	info := `"workload":"%s","backend":"pytorch 2.8","backend_description":"NVIDIA H200","attn_implementation":"sdpa","dtype":"bfloat16","params":494032768,"layers":24,"hidden":896,"vocab":151936,"load_s":1.5,"flops_per_token":2964196608.0`
	hf := func(w, rest string) string { return "{" + strings.Replace(info, "%s", w, 1) + "," + rest + "}" }
	results := map[string]string{
		"sft_hf": hf("sft", `"batch":8,"seq_len":512,"tokens_per_step":4096,"losses":[12.1,11.9],"warmup_s":3.0,"step_s":[0.2,0.2],`+
			`"mean_step_s":0.2,"tokens_per_s":20480.0,"achieved_tflops":60.7,"peak_tflops":790,"mfu":0.0768,"peak_memory_gib":null`),
		"sft_go": `{"workload":"sft","batch":8,"seq_len":512,"tokens_per_step":4096,"step_s":[0.1],"tokens_per_s":40960,"master_dtype":"float32"}`,
		"grpo_hf": hf("grpo", `"prompts":64,"generations":8,"prompt_len":64,"new_tokens":64,"micro_batch":64,"updates":8,"losses":[0.0],`+
			`"grad_norms":[1.0],"completion_len":64,"warmup_s":9.0,"generate_s":3.0,"reward_s":0.01,"train_s":1.0,"step_s":4.0,`+
			`"generated_tokens":32768,"generate_tokens_per_s":10922.6,"train_tokens":65536,"train_tokens_per_s":65536.0,`+
			`"train_achieved_tflops":194.3,"mean_reward":0.5,"sequences_per_s":128.0`),
		"grpo_go":   `{"prompts":64,"generations":8,"new_tokens":64,"step_s":8,"generate_s":6,"train_s":2,"train_mfu":0.05}`,
		"decode_hf": hf("decode", `"runs":[{"batch":1,"rows":1,"prompt_len":64,"new_tokens":64,"warmup_s":0.5,"total_s":1.0,"tokens":64,"tokens_per_second":64.0}]`),
		"sample":    `{"reference_backend":"go:parallelism=-1","tokens":320,"tokens_equal":318,"max_logprob_diff":0.002}`,
		"decode_go": `{"runs":[{"batch":1,"tokens_per_second":32.0,"decode_steps_per_call":1},{"batch":4,"tokens_per_second":100.0,"decode_steps_per_call":1}]}`,
		// The largest batch again at 8 decode steps per execution: a row of its own, no PyTorch side.
		"decode_go_steps": `{"runs":[{"batch":4,"tokens_per_second":120.0,"decode_steps_per_call":8}]}`,
	}
	order := []string{"sample", "sft_go", "grpo_go", "decode_go", "decode_go_steps", "sft_hf", "grpo_hf", "decode_hf"}
	rep, err := BuildReport(writeStages(t, dir, order, results), map[string]string{"mode": "test"}, map[string]float64{"float32": 2e-3})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SideBySide{}
	for _, r := range rep.Throughput {
		got[r.Workload] = r
	}
	want := map[string][3]float64{ // posttrain, pytorch, ratio
		"sft step 8×512":                {40960, 20480, 2},
		"grpo step 64×8×64":             {8, 4, 0.5},
		"grpo step 64×8×64: generation": {6, 3, 0.5},
		"grpo step 64×8×64: update":     {2, 1, 0.5},
		"decode batch 1":                {32, 64, 0.5},
	}
	for name, w := range want {
		r, ok := got[name]
		if !ok || r.Posttrain == nil || r.PyTorch == nil || r.Ratio == nil ||
			*r.Posttrain != w[0] || *r.PyTorch != w[1] || math.Abs(*r.Ratio-w[2]) > 1e-12 {
			t.Errorf("%s: %+v, want %v", name, r, w)
		}
	}
	if r := got["sft step 8×512"]; r.PyTorchMFU == nil || *r.PyTorchMFU != 0.0768 || r.PosttrainMFU != nil {
		t.Errorf("sft MFU: posttrain %v, pytorch %v", r.PosttrainMFU, r.PyTorchMFU)
	}
	if r := got["grpo step 64×8×64"]; r.PosttrainMFU == nil || *r.PosttrainMFU != 0.05 || r.PyTorchMFU != nil {
		t.Errorf("grpo MFU: posttrain %v, pytorch %v", r.PosttrainMFU, r.PyTorchMFU)
	}
	for name, w := range map[string]float64{"decode batch 4": 100, "decode batch 4, 8 steps a call": 120} {
		if r := got[name]; r.Posttrain == nil || *r.Posttrain != w || r.PyTorch != nil || r.Ratio != nil {
			t.Errorf("%s: %+v, want posttrain %v alone", name, r, w)
		}
	}
	for i, name := range order {
		if s := rep.Stages[i]; s.Name != name || string(s.Data) != results[name] {
			t.Errorf("stage %d (%s): data %s, want the output verbatim", i, s.Name, s.Data)
		}
	}
	var buf bytes.Buffer
	PrintSummary(&buf, rep)
	rep.Stages = append(rep.Stages, Stage{Name: "backend", Status: "ok", Data: json.RawMessage(`{"workload":"backend","backend":"xla:/s/xla_cuda_plugin.so","client_api":"0.83 (go-xla v0.1.4)","plugin_path":"/s/xla_cuda_plugin.so","plugin_api":"0.115","xla_version":"2","stablehlo_version":"1.20.0","stablehlo_minimum_version":"0.9.0","devices":["cuda:0"],"adaptations":["PJRT C API skew, client 0.83, plugin 0.115: none needed","GOPJRT_CUDA_CHECKS=0: off"]}`)})
	buf.Reset()
	PrintSummary(&buf, rep)
	for _, s := range []string{"mode: test", "backend: xla:/s/xla_cuda_plugin.so: plugin /s/xla_cuda_plugin.so, PJRT C API 0.115 (client 0.83 (go-xla v0.1.4)), XLA 2, StableHLO 1.20.0 (accepts from 0.9.0); devices cuda:0",
		"  adaptation: PJRT C API skew, client 0.83, plugin 0.115: none needed\n  adaptation: GOPJRT_CUDA_CHECKS=0: off\n", "sampler (tiny fixture, every variant, vs go:parallelism=-1): 318 of 320 tokens equal, max |Δ log-prob| 0.002",
		"MFU — | 7.7%", "result: ok"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("summary lacks %q:\n%s", s, buf.String())
		}
	}
}

// A score output that is not the expected shape fails its check with the reason.
func TestBuildReport_MalformedScoreOutputFailsTheCheck(t *testing.T) {
	dir := t.TempDir()
	stages := writeStages(t, dir, []string{"score_go_float32", "score_hf_float32"}, map[string]string{
		"score_go_float32": `{"token_positions":[[1.5]],"token_logprobs":[[-1]],"loss":1}`,
		"score_hf_float32": `{"token_positions":[[1]],"token_logprobs":[[-1]],"loss":1}`,
	})
	rep, err := BuildReport(stages, nil, map[string]float64{"float32": 1})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.LogProbs["float32"]
	if rep.OK || c == nil || c.Pass || !strings.Contains(c.Error, "posttrain's score output") {
		t.Errorf("ok %v, check %+v", rep.OK, c)
	}
}

// The data-parallel trainer stages get a per-device line: their train speeds divided by the
// report's data_parallel_devices; the one-device stages and a one-device report get none.
func TestPrintSummary_DataParallelPerDevice(t *testing.T) {
	compile := 2.0
	metrics := json.RawMessage(`{"metrics":[{"step":1,"tokens_per_s/generation":100,"tokens_per_s/update":400},{"step":2,"tokens_per_s/generation":120,"tokens_per_s/update":480}]}`)
	rep := &Report{Info: map[string]string{"mode": "test", "data_parallel_devices": "4"}, Stages: []Stage{
		{Name: "trainer_grpo", Status: "ok", Data: metrics}, {Name: "trainer_grpo_dp", Status: "ok", Data: metrics},
		{Name: "trainer_sft_dp", Status: "ok", Seconds: 12, CompileS: &compile, Data: json.RawMessage(`{"metrics":[{"step":3,"num_tokens":8000}]}`)}}}
	var buf bytes.Buffer
	PrintSummary(&buf, rep)
	if got := strings.Count(buf.String(), "per device"); got != 2 {
		t.Fatalf("%d per-device lines, want 2:\n%s", got, buf.String())
	}
	// The SFT stage's own line carries the figure the per-device one divides.
	if want := "num_tokens 8000, num_tokens / (stage − compile s) 800"; !strings.Contains(buf.String(), want) {
		t.Errorf("summary lacks %q:\n%s", want, buf.String())
	}
	for _, want := range []string{"per device (4 devices): tokens_per_s/generation 30, tokens_per_s/update 120",
		"per device (4 devices): num_tokens / (stage − compile s) 200"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, buf.String())
		}
	}
	rep.Info["data_parallel_devices"] = "1"
	buf.Reset()
	PrintSummary(&buf, rep)
	if strings.Contains(buf.String(), "per device") {
		t.Errorf("one device: a per-device line:\n%s", buf.String())
	}
}
