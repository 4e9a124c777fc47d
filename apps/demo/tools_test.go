package demo

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tools"
	"github.com/posttrain/posttrain/internal/backend"
)

// The tools demo's SFT conversations render, under its chat template, to Qwen's tool-call turns
// with the tools named on the system line, and the call the model is taught parses (Hermes, as
// GRPO parses the model's own) back to the calculator on the problem's expression, whose result
// is the product the conversation ends with.
func TestToolsConversations_RenderAndParse(t *testing.T) {
	calc, err := tools.Lookup([]string{"calculator"})
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.Parse(ToolsChatTemplate, map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
	if err != nil {
		t.Fatal(err)
	}
	p := toolProblem{4780, 3328}
	c, err := toolsCompletion(p, calc, true)
	if err != nil {
		t.Fatal(err)
	}
	text, err := tpl.Render(append(toolsPrompt(p), c...), chat.Options{Tools: calc.Schemas()})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\ncalc tools: calculator<|im_end|>\n<|im_start|>user\n4780*3328<|im_end|>\n" +
		"<|im_start|>assistant\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"4780*3328\"}}\n</tool_call><|im_end|>\n" +
		"<|im_start|>user\n<tool_response>\n15907840\n</tool_response><|im_end|>\n<|im_start|>assistant\n15907840<|im_end|>\n"
	if text != want {
		t.Fatalf("rendered\n%q\nwant\n%q", text, want)
	}
	turn := strings.TrimSuffix(strings.Split(text, "<|im_start|>assistant\n")[1], "<|im_end|>\n<|im_start|>user\n<tool_response>\n15907840\n</tool_response><|im_end|>\n")
	calls := tools.Parse(tools.Hermes, turn)
	if len(calls) != 1 || calls[0].Name != "calculator" || calls[0].Arguments["expression"] != "4780*3328" {
		t.Fatalf("the taught call parses to %+v", calls)
	}
	if got, failed := calc.Run(calls[0]); failed || got != p.product() {
		t.Errorf("the calculator gives %q (failed %v), want %s", got, failed, p.product())
	}
	direct, err := toolsCompletion(p, calc, false)
	if err != nil || len(direct) != 1 || direct[0].Content != "15907840" {
		t.Errorf("the direct answer %+v, %v", direct, err)
	}
	ps, err := toolProblems(50, 4, 1)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[toolProblem]bool{}
	for _, q := range ps {
		if seen[q] || q.A < 1000 || q.A > 9999 || q.B < 1000 || q.B > 9999 {
			t.Fatalf("problem %v repeated or not 4 digits", q)
		}
		seen[q] = true
	}
}

// A miniature tools demo runs every stage (tokenizer and model under the tools template, SFT on
// tool-calling conversations, the three GRPO conditions with their evaluations before and after)
// and refuses a directory of another demo; the learning itself is measured by `posttrain demo
// --tools` (docs/demo.md).
func TestRunTools_Miniature(t *testing.T) {
	o := ToolsDefault
	o.OutputDir = t.TempDir()
	o.Shape = ModelShape{Hidden: 16, Intermediate: 32, Layers: 1, Heads: 2, KVHeads: 1}
	o.SFTProblems, o.GRPOProblems, o.HeldOut = 40, 8, 4
	o.SFTSteps, o.SFTBatch, o.GRPOSteps, o.GRPOPrompts, o.NumGen, o.Seeds = 2, 4, 1, 2, 2, 1
	o.MaxCompletionLength = 40
	rep, err := RunTools(stdctx.Background(), o, Env{Backend: backend.MustNewForTests()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Runs) != len(ToolsConditions) {
		t.Fatalf("%d runs, want %d", len(rep.Runs), len(ToolsConditions))
	}
	for i, r := range rep.Runs {
		if r.Condition != ToolsConditions[i].Name || r.Seed != 1 {
			t.Errorf("run %d: %+v", i, r)
		}
		for _, e := range []ToolsEval{r.Before, r.After} {
			if e.Accuracy < 0 || e.Accuracy > 1 || e.CallRate < 0 {
				t.Errorf("%s: evaluation %+v", r.Condition, e)
			}
		}
		if _, err := os.Stat(filepath.Join(r.Dir, "metrics.jsonl")); err != nil {
			t.Error(err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(o.OutputDir, "tokenizer", "tokenizer_config.json"))
	if err != nil || !strings.Contains(string(cfg), "' tools:'") {
		t.Errorf("the tokenizer is not saved with the tools template (%v)", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, DirMark), []byte(`{"model": ""}`), 0o644); err != nil {
		t.Fatal(err)
	}
	o.OutputDir = other
	if _, err := RunTools(stdctx.Background(), o, Env{Backend: backend.MustNewForTests()}); err == nil || !strings.Contains(err.Error(), "holds another demo's runs") {
		t.Errorf("another demo's directory: %v", err)
	}
}
