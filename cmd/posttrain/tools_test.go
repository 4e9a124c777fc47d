package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/extreward/openenvtest"
)

// qwen25Tokenizer writes Qwen's tokenizer (data/tokenizer/testdata) with Qwen2.5-Instruct's chat
// template (tools, <tool_call> turns, prefix-preserving) into a directory for `init --tokenizer`.
func qwen25Tokenizer(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "data", "tokenizer", "testdata")
	dir := filepath.Join(t.TempDir(), "qwen25-tokenizer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gz, err := os.ReadFile(filepath.Join(src, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join("..", "..", "data", "chat", "testdata", "qwen25_chat_template.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["chat_template"] = string(tmpl)
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json.gz"), gz, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// `grpo --tools calculator` renders the tool's schema into every prompt through the chat template
// and logs TRL 1.x's tool metrics; an unknown tool, a family whose call format is not parsed and a
// template that is not prefix-preserving (Qwen3's) are refused by name before training.
func TestGRPO_ToolsCLI(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := runCLI(t, "init", "--preset", "tiny", "--tokenizer", qwen25Tokenizer(t), "--out", model); err != nil {
		t.Fatal(err)
	}
	data := multData(t, dir, "grpo", "4")
	args := func(out string, extra ...string) []string {
		return append([]string{"grpo", "--model", model, "--dataset", data, "--output-dir", filepath.Join(dir, out), "--max-steps", "1",
			"--num-generations", "2", "--max-completion-length", "8", "--per-device-train-batch-size", "4", "--reward", "mult_correct",
			"--gradient-checkpointing=false"}, extra...)
	}
	if _, err := runCLI(t, args("out", "--tools", "calculator", "--max-tool-calling-iterations", "2")...); err != nil {
		t.Fatal(err)
	}
	c, err := os.ReadFile(filepath.Join(dir, "out", "completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var first struct {
		Prompt string `json:"prompt"`
	}
	line, _, _ := strings.Cut(string(c), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil || !strings.Contains(first.Prompt, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"calculator\"") {
		t.Errorf("the prompts do not show the calculator's schema: %.400s", c)
	}
	recs := metricsLines(t, filepath.Join(dir, "out"))
	if _, ok := recs[0].Metrics["tools/call_frequency"]; !ok || len(recs) != 1 {
		t.Errorf("metrics %v: no tools/call_frequency", recs)
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{[]string{"--tools", "search"}, `tools (--tools) no tool "search" (built in: calculator; or FILE.py:FUNC, a dotted module.func)`},
		{[]string{"--tools", "calculator", "--max-tool-calling-iterations", "-1"}, "max_tool_calling_iterations (--max-tool-calling-iterations) must be ≥ 0"},
	} {
		_, err := runCLI(t, args("bad", c.extra...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.extra, err, c.want)
		}
	}
	qwen3 := filepath.Join(dir, "qwen3")
	if _, err := runCLI(t, "init", "--preset", "qwen3-tiny", "--tokenizer", filepath.Join("..", "..", "data", "tokenizer", "testdata"), "--out", qwen3); err != nil {
		t.Fatal(err)
	}
	a := args("bad3", "--tools", "calculator")
	a[2] = qwen3
	if _, err := runCLI(t, a...); err == nil || !strings.Contains(err.Error(), "not prefix-preserving") {
		t.Errorf("Qwen3's template: %v", err)
	}
}

// `grpo --environment FILE.py:Class` (TRL 1.x's environment_factory): each rollout's instance is
// reset with its row, its observation ends the prompt's last message, its methods are tools whose
// schemas the prompt shows, and its get_reward is the run's reward (no reward function needed),
// logged under the class's name; a reset that raises stops the run with one line and a checkpoint.
func TestGRPO_EnvironmentCLI(t *testing.T) {
	needPython3(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := runCLI(t, "init", "--preset", "tiny", "--tokenizer", qwen25Tokenizer(t), "--out", model); err != nil {
		t.Fatal(err)
	}
	data := multData(t, dir, "grpo", "4")
	envs, err := filepath.Abs(filepath.Join("..", "..", "data", "extreward", "testdata", "envs.py"))
	if err != nil {
		t.Fatal(err)
	}
	args := func(out, class string, extra ...string) []string {
		return envGRPOArgs(model, data, filepath.Join(dir, out), append([]string{"--environment", envs + ":" + class}, extra...)...)
	}
	if _, err := runCLI(t, args("out", "Counter")...); err != nil {
		t.Fatal(err)
	}
	first := firstCompletion(t, filepath.Join(dir, "out"))
	if !strings.Contains(first.Prompt, "숫자 하나로만 답하세요. Reach 3.<|im_end|>") ||
		!strings.Contains(first.Prompt, `{"type": "function", "function": {"name": "add", "description": "Adds n to the counter."`) {
		t.Errorf("the prompt does not end with the observation or show the add tool: %q", first.Prompt)
	}
	if _, ok := first.Rewards["Counter"]; !ok {
		t.Errorf("completions.jsonl's rewards %v have no Counter", first.Rewards)
	}
	recs := metricsLines(t, filepath.Join(dir, "out"))
	if _, ok := recs[0].Metrics["rewards/Counter/mean"]; !ok {
		t.Errorf("metrics %v: no rewards/Counter/mean", recs[0].Metrics)
	}
	rc, stderr := runFiles(t, args("bad", "BadReset", "--reward", "len:5")...)
	if rc == 0 || !strings.Contains(stderr, "grpo: step 1: environment BadReset: reset raised RuntimeError: cannot reset") {
		t.Errorf("a failing reset: exit %d, %s", rc, stderr)
	}
	if _, err := runCLI(t, args("silent", "Silent")...); err == nil || !strings.Contains(err.Error(), "no reward source") {
		t.Errorf("an environment without get_reward and no reward function: %v", err)
	}
}

// envGRPOArgs are the environment tests' two-step GRPO run of model on data into out, with extra
// (the environment's flags).
func envGRPOArgs(model, data, out string, extra ...string) []string {
	return append([]string{"grpo", "--model", model, "--dataset", data, "--output-dir", out, "--max-steps", "2",
		"--num-generations", "2", "--max-completion-length", "8", "--per-device-train-batch-size", "4", "--save-steps", "1",
		"--gradient-checkpointing=false"}, extra...)
}

// firstCompletion is the first line of the completions.jsonl in out: its prompt and rewards.
func firstCompletion(t *testing.T, out string) (first struct {
	Prompt  string         `json:"prompt"`
	Rewards map[string]any `json:"rewards"`
}) {
	t.Helper()
	c, err := os.ReadFile(filepath.Join(out, "completions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(c), "\n")
	if err := json.Unmarshal([]byte(line), &first); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	return first
}

// `grpo --environment-url URL` (an OpenEnv server; here the twin of openenv-core's, whose answers
// are the real server's record): each rollout's session is reset with its row (the columns a and
// b), the observation ends the prompt's last message, the step tool's schema (the server's action
// schema) is in the prompt, and the server's reward is the run's, logged under its name; a
// generation batch wider than the server's capacity stops at the first step with one line naming
// the setting to change; a URL that does not answer is refused before training.
func TestGRPO_EnvironmentURLCLI(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := runCLI(t, "init", "--preset", "tiny", "--tokenizer", qwen25Tokenizer(t), "--out", model); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "mult.jsonl")
	var rows []string
	for i := range 4 {
		rows = append(rows, fmt.Sprintf(`{"prompt": [{"role": "user", "content": "Answer with the step tool."}], "a": %d, "b": %d}`, 12+i, 34))
	}
	if err := os.WriteFile(data, []byte(strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv, err := openenvtest.Start(4)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	args := func(out, url string) []string {
		return envGRPOArgs(model, data, filepath.Join(dir, out), "--environment-url", url)
	}
	if _, err := runCLI(t, args("out", srv.URL)...); err != nil {
		t.Fatal(err)
	}
	first := firstCompletion(t, filepath.Join(dir, "out"))
	if !regexp.MustCompile(`Answer with the step tool\.What is 1[2-5] times 34\?<\|im_end\|>`).MatchString(first.Prompt) ||
		!strings.Contains(first.Prompt, `{"type": "function", "function": {"name": "step", "description": "Answers the multiplication question.", "parameters": {"type": "object", "properties": {"answer": {"description": "the product", "type": "integer"}}, "required": ["answer"]}}}`) {
		t.Errorf("the prompt does not end with the observation or show the step tool: %q", first.Prompt)
	}
	if r, ok := first.Rewards["multiply"]; !ok || r != "NaN" && r != 0.0 && r != 1.0 {
		t.Errorf("completions.jsonl's rewards %v have no multiply in {NaN, 0, 1}", first.Rewards)
	}
	recs := metricsLines(t, filepath.Join(dir, "out"))
	if _, ok := recs[0].Metrics["rewards/multiply/mean"]; !ok {
		t.Errorf("metrics %v: no rewards/multiply/mean", recs[0].Metrics)
	}
	small, err := openenvtest.Start(2)
	if err != nil {
		t.Fatal(err)
	}
	defer small.Close()
	rc, stderr := runFiles(t, args("small", small.URL)...)
	// The sessions reset at once, so which two of the four the server refuses varies.
	capacity := regexp.MustCompile(`grpo: step 1: environment multiply: reset of session [1-4] refused: Server at capacity: 2/2 sessions active\. Cannot accept new connections\. \(a generation batch needs 4 sessions at once: start the server with max_concurrent_envs ≥ 4\)`)
	if rc == 0 || !capacity.MatchString(stderr) {
		t.Errorf("past the server's capacity: exit %d, %s", rc, stderr)
	}
	down := small.URL
	small.Close()
	if _, err := runCLI(t, args("down", down)...); err == nil || !strings.Contains(err.Error(), "environment_url") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a server that does not answer: %v", err)
	}
}

// `posttrain demo --tools` refuses the other demos' flags and theirs without it, before any stage.
func TestDemoTools_Flags(t *testing.T) {
	out := filepath.Join(t.TempDir(), "demo")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--tools", "--rlhf"}, "--tools trains the demo's own model on its own prompts: drop --rlhf, --model and --prompt"},
		{[]string{"--tool-share", "0.4"}, "--tool-share is a flag of the tools demo: add --tools"},
		{[]string{"--tools", "--max-factor", "5"}, "--max-factor is not a flag of the tools demo"},
		{[]string{"--tools", "--tool-share", "1.5"}, "the share of SFT conversations with a tool call must be in (0, 1), got 1.5"},
	} {
		_, err := runCLI(t, append([]string{"demo", "--output-dir", out}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("demo %v: %v, want %q", c.args, err, c.want)
		}
	}
}
