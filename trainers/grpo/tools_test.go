package grpo

import (
	"bytes"
	"compress/gzip"
	stdctx "context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tools"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/graphtest"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// qwenText loads Qwen's tokenizer (data/tokenizer/testdata) with Qwen2.5-Instruct's chat template.
func qwenText(t *testing.T) *encode.Text {
	t.Helper()
	return fixtureText(t, "../../data/tokenizer/testdata", "../../data/chat/testdata/qwen25_chat_template.jinja")
}

// codec is txt's tokenizer as the tool loop's tests use it: text to int32 ids, and ids to text
// without special tokens (as the loop decodes a turn).
func codec(txt *encode.Text) (enc func(string) []int32, decode func([]int32) string) {
	enc = func(s string) []int32 {
		var out []int32
		for _, id := range txt.Tokenizer.Encode(s) {
			out = append(out, int32(id))
		}
		return out
	}
	decode = func(ids []int32) string { return txt.Tokenizer.Decode(toInts(ids), true) }
	return enc, decode
}

// fixtureText is a tokenizer fixture directory's tokenizer.json.gz and tokenizer_config.json
// with the chat template in templatePath.
func fixtureText(t *testing.T, tokDir, templatePath string) *encode.Text {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(filepath.Join(tokDir, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tj, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(templatePath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(tokDir, "tokenizer_config.json"))
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
	for name, b := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": raw} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	txt, err := encode.Load(dir, encode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return txt
}

// The tool turn that follows a completion's calls is Qwen2.5's template rendering of the tool
// messages and the next assistant header, as TRL 1.16's _get_tool_suffix_ids cuts it (ids printed
// by transformers 5 with trl's code on this tokenizer and template).
func TestToolSuffix_AsTRL(t *testing.T) {
	txt := qwenText(t)
	got, err := txt.ToolSuffix([]chat.Message{encode.ToolMessage("calculator", "440040051"), encode.ToolMessage("calculator", "{'error': 'division by zero'}")})
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{198, 151644, 872, 198, 151665, 198, 19, 19, 15, 15, 19, 15, 15, 20, 16, 198, 151666, 198, 151665, 198, 13608, 841, 1210, 364, 28764, 553, 7168, 16418, 151666, 151645, 198, 151644, 77091, 198}
	if !slices.Equal(got, want) {
		t.Errorf("suffix %v\nwant   %v", got, want)
	}
}

// Llama 3.1-Instruct's template (TRL's copy, models/encode/testdata/llama3_tools, with Llama 3.1's
// tokenizer): the prompt with the calculator's schema renders as transformers renders it, text and
// ids, and the tool turn after a call is what TRL 1.16's _get_tool_suffix_ids cuts (an ipython
// turn per result, then the next assistant header); the family's format is Llama 3.x's.
func TestToolSuffix_Llama3AsTRL(t *testing.T) {
	const dir = "../../models/encode/testdata/llama3_tools"
	txt := fixtureText(t, "../../data/tokenizer/testdata/llama3", filepath.Join(dir, "chat_template.jinja"))
	raw, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Suffix []struct {
			Messages []struct{ Name, Content string } `json:"messages"`
			IDs      []int32                          `json:"ids"`
		} `json:"suffix"`
		Prompt struct {
			Messages []chat.Message    `json:"messages"`
			Tools    []json.RawMessage `json:"tools"`
			Text     string            `json:"text"`
			IDs      []int             `json:"ids"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if f, err := tools.FormatOf("llama", txt.Template.Source); err != nil || f != tools.Llama3 {
		t.Fatalf("format %q, %v", f, err)
	}
	txt.PromptTools = g.Prompt.Tools
	text, err := txt.RenderPrompt(g.Prompt.Messages)
	if err != nil {
		t.Fatal(err)
	}
	if text != g.Prompt.Text {
		t.Errorf("prompt\n%q\nwant\n%q", text, g.Prompt.Text)
	}
	if ids := txt.Tokenizer.Encode(text); !slices.Equal(ids, g.Prompt.IDs) {
		t.Errorf("prompt ids %v\nwant       %v", ids, g.Prompt.IDs)
	}
	for _, c := range g.Suffix {
		var msgs []chat.Message
		for _, m := range c.Messages {
			msgs = append(msgs, encode.ToolMessage(m.Name, m.Content))
		}
		got, err := txt.ToolSuffix(msgs)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.IDs) {
			t.Errorf("%d results: suffix %v\nwant %v", len(msgs), got, c.IDs)
		}
	}
}

// A multi-turn rollout: a completion's calls run, their tool turn is appended with mask 0 and
// log-prob 0, generation continues from prompt + completion + tool turn, and stops at a turn
// without calls, at max_tool_calling_iterations, or where the next tool turn would pass
// max_completion_length; a completion without calls is left as it was.
func TestTools_MultiTurnRollout(t *testing.T) {
	txt := qwenText(t)
	enc, decode := codec(txt)
	turn := func(s string, eos bool) generate.Generation {
		ids := enc(s)
		if eos {
			ids = append(ids, 151645)
		}
		lps := make([]float64, len(ids))
		for i := range lps {
			lps[i] = -0.5
		}
		return generate.Generation{IDs: ids, LogProbs: lps, Truncated: !eos}
	}
	call := func(expr string) string {
		return "<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"" + expr + "\"}}\n</tool_call>"
	}
	prompts := []*encode.Prompt{{IDs: enc("<|im_start|>user\nWhat is 48213*9127?<|im_end|>\n<|im_start|>assistant\n")}, {IDs: enc("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")}, {IDs: enc("<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n")}}
	set, err := tools.Lookup([]string{"calculator"})
	if err != nil {
		t.Fatal(err)
	}
	tt := &Tools{Set: set, Format: tools.Hermes, Suffix: txt.ToolSuffix}
	// The script: row 0 calls once then answers; row 1 answers at once; row 2 calls every turn.
	script := map[string][]generate.Generation{
		"first": {turn(call("48213*9127"), true), turn("Hello!", true), turn(call("1/0"), true)},
	}
	var calls [][]int // the rows of each continuation call, by their prompt lengths
	gen := func(p []*encode.Prompt, o generate.Options) ([]generate.Generation, error) {
		var out []generate.Generation
		var lens []int
		for _, q := range p {
			lens = append(lens, len(q.IDs))
			if strings.Contains(decode(q.IDs), "What is 48213") {
				out = append(out, turn("The answer is 440040051.", true))
			} else {
				out = append(out, turn(call("2**10"), true))
			}
		}
		calls = append(calls, lens)
		return out, nil
	}
	for _, c := range []struct {
		name     string
		maxIter  int
		maxLen   int
		rounds   int // continuation calls
		calls    int
		failures int
	}{
		{"no bound: row 2 calls until the budget stops it", 0, 200, 5, 6, 1},
		{"max_tool_calling_iterations 1", 1, 200, 1, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			gens := slices.Clone(script["first"])
			for i := range gens {
				gens[i].IDs, gens[i].LogProbs = slices.Clone(gens[i].IDs), slices.Clone(gens[i].LogProbs)
			}
			calls = nil
			tt.MaxIterations = c.maxIter
			res, err := tt.run(gen, prompts, gens, generate.Options{MaxNewTokens: c.maxLen, Seed: 1}, decode, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(calls) != c.rounds || res.calls != c.calls || res.failures != c.failures {
				t.Errorf("%d continuation calls %v, %d tool calls, %d failures; want %d, %d, %d", len(calls), calls, res.calls, res.failures, c.rounds, c.calls, c.failures)
			}
			suffix, _ := txt.ToolSuffix([]chat.Message{encode.ToolMessage("calculator", "440040051")})
			first := enc(call("48213*9127"))
			wantRow0 := append(append(append(first, 151645), suffix...), append(enc("The answer is 440040051."), 151645)...)
			if !slices.Equal(gens[0].IDs, wantRow0) {
				t.Errorf("row 0: %q\nwant %q", decode(gens[0].IDs), decode(wantRow0))
			}
			for i, g := range gens {
				if len(g.IDs) != len(g.LogProbs) || len(g.IDs) != len(res.mask[i]) || len(g.IDs) > c.maxLen {
					t.Fatalf("row %d: %d ids, %d log-probs, %d mask (max %d)", i, len(g.IDs), len(g.LogProbs), len(res.mask[i]), c.maxLen)
				}
			}
			for j := range gens[0].IDs { // the tool turn's tokens: mask 0, log-prob 0
				inTool := j >= len(first)+1 && j < len(first)+1+len(suffix)
				if (res.mask[0][j] == 0) != inTool || (gens[0].LogProbs[j] == 0) != inTool {
					t.Errorf("row 0 token %d: mask %v log-prob %v, tool turn %v", j, res.mask[0][j], gens[0].LogProbs[j], inTool)
				}
			}
			conv, err := json.Marshal(res.conversations[0])
			if err != nil {
				t.Fatal(err)
			}
			wantConv := `[{"role":"assistant","content":"","tool_calls":[{"function":{"arguments":{"expression":"48213*9127"},"name":"calculator"},"type":"function"}]},` +
				`{"role":"tool","content":"440040051","name":"calculator"},{"role":"assistant","content":"The answer is 440040051."}]`
			if string(conv) != wantConv || res.last[0] != "The answer is 440040051." {
				t.Errorf("row 0's conversation %s, last turn %q\nwant %s", conv, res.last[0], wantConv)
			}
			if !slices.Equal(gens[1].IDs, script["first"][1].IDs) || slices.Contains(res.mask[1], 0) || len(res.conversations[1]) != 1 || res.last[1] != "Hello!" {
				t.Errorf("row 1 (no call) changed: %q", decode(gens[1].IDs))
			}
			if c.maxIter == 0 && (!gens[2].Truncated || len(gens[2].IDs) != c.maxLen) {
				t.Errorf("row 2: %d ids, truncated %v: want cut at max_completion_length %d", len(gens[2].IDs), gens[2].Truncated, c.maxLen)
			}
			if !strings.Contains(decode(gens[2].IDs), "{'error': 'division by zero'}") {
				t.Errorf("row 2: the failed call's result is missing: %q", decode(gens[2].IDs))
			}
		})
	}
}

// toolLetters is the tiny model's decoder (letters) where id 11 is a calculator call and id 13 a
// malformed call, so that the randomly initialised model calls tools as it samples; with add, id
// 12 is a call of an environment's add(n=2).
type toolLetters struct{ add bool }

func (l toolLetters) Decode(ids []int, skipSpecial bool) string {
	var b strings.Builder
	for _, id := range ids {
		switch {
		case id == 0 && skipSpecial:
		case id == 11:
			b.WriteString(`<tool_call>{"name": "calculator", "arguments": {"expression": "6*7"}}</tool_call>`)
		case id == 13:
			b.WriteString(`<tool_call>{"name": "weather", "arguments": {}}</tool_call>`)
		case id == 12 && l.add:
			b.WriteString(`<tool_call>{"name": "add", "arguments": {"n": 2}}</tool_call>`)
		default:
			b.WriteByte(byte('a' + id))
		}
	}
	return b.String()
}

// toolsRun is resumeRun with tools: the tiny model's calls (toolLetters) run the calculator, the
// tool turn is two tokens per tool message.
func toolsRun(t *testing.T, c *Config, stopAt int, onStep func(StepInfo), edit ...func(*Setup)) (map[string][]float32, error) {
	t.Helper()
	ctx, cancel := stdctx.WithCancelCause(stdctx.Background())
	defer cancel(nil)
	set, err := tools.Lookup([]string{"calculator"})
	if err != nil {
		t.Fatal(err)
	}
	suffix := func(msgs []chat.Message) ([]int32, error) {
		var ids []int32
		for range msgs {
			ids = append(ids, 14, 15)
		}
		return ids, nil
	}
	s := Setup{Config: resolved(t, c), Backend: testBackend(), Model: tinyModel(t, 3),
		Decoder: toolLetters{}, StopIDs: []int{0}, Prompts: tinyPrompts(), Rewards: []Reward{countReward('c')},
		Tools: &Tools{Set: set, Format: tools.Hermes, Suffix: suffix, MaxIterations: 2},
		OnStep: func(s StepInfo) {
			if onStep != nil {
				onStep(s)
			}
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
	_, err = tr.Train(ctx)
	return modelWeights(t, tr), err
}

// A multi-turn run (the tiny model calls the calculator as it samples) resumed in the middle of a
// generation batch ends as the straight run does, bit for bit: the continuation rounds draw from
// the restored generation round's seeds. Its tool turns are masked out of the loss, its
// completions.jsonl lines carry the conversations, and tools/* are logged.
func TestGRPO_ToolsResumeEqualsStraight(t *testing.T) {
	config := func() *Config {
		c := tinyConfig(t)
		c.MaxSteps, c.NumIterations, c.MaxCompletionLength = 4, 2, 12
		return c
	}
	straight := config()
	toolTokens := 0
	want, err := toolsRun(t, straight, 0, func(s StepInfo) {
		// The masked tokens are the tool turns: two per tool message of the conversation.
		r := s.Scored
		for i := range r.Completions {
			masked, msgs := 0, 0
			for _, m := range r.Mask[i] {
				if m == 0 {
					masked++
				}
			}
			for _, m := range r.Conversations[i] {
				if m.Role == "tool" {
					msgs++
				}
			}
			if masked != 2*msgs {
				t.Errorf("step %d row %d: %d masked tokens, %d tool messages", s.Step, i, masked, msgs)
			}
			toolTokens += masked
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if toolTokens == 0 {
		t.Error("no tool turn in the rollouts")
	}
	c := config()
	if _, err := toolsRun(t, c, 1, nil); !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("interrupted run: %v", err)
	}
	resumed := config()
	resumed.OutputDir, resumed.Resume = c.OutputDir, true
	got, err := toolsRun(t, resumed, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("resumed run's weights differ from the straight run's by %g", d)
	}
	looptest.SameMetrics(t, filepath.Join(straight.OutputDir, runlog.MetricsName), filepath.Join(c.OutputDir, runlog.MetricsName))
	a, err1 := os.ReadFile(filepath.Join(straight.OutputDir, runlog.CompletionsName))
	b, err2 := os.ReadFile(filepath.Join(c.OutputDir, runlog.CompletionsName))
	if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
		t.Errorf("completions.jsonl of the resumed run differs (%v, %v)", err1, err2)
	}
	if !bytes.Contains(a, []byte(`{"role":"tool","content":"42","name":"calculator"}`)) || !bytes.Contains(a, []byte(`{"role":"tool","content":"{'error': 'Tool weather not found.'}","name":"weather"}`)) {
		t.Errorf("completions.jsonl shows no tool turn: %.600s", a)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(straight.OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	calls, later := 0.0, 0.0
	for _, r := range recs {
		calls += r.Metrics["tools/call_frequency"]
		later += r.Metrics[TurnMetric(2, "max")] + r.Metrics[TurnMetric(3, "max")] + r.Metrics[TurnMetric(4, "max")]
		if _, ok := r.Metrics[TurnMetric(1, "mean")]; !ok {
			t.Errorf("step %d logs no sampling gap per turn: %v", r.Step, r.Metrics)
		}
		if r.Metrics[TurnMetric(1, "max")] > r.Metrics[sampleDiffMax] || r.Metrics[TurnMetric(2, "max")] > r.Metrics[sampleDiffMax] {
			t.Errorf("step %d: a turn's gap is past the completion's: %v", r.Step, r.Metrics)
		}
	}
	if calls == 0 || later == 0 {
		t.Errorf("no tool call (%g) or no later turn (%g) in %d steps: the test does not exercise the loop", calls, later, len(recs))
	}
}

// counters is a Go environment for the tiny model's runs: instance i is a counter that add
// moves; reset takes the row's "target" column and answers " to N" (letters the tiny model's
// render reads) on rows whose target is even, nothing on the others; its reward is 1 at the
// target.
type counters struct {
	value, target []int
	resets        int
}

func (c *counters) Reset(rows []map[string]any) ([]*string, error) {
	c.resets++
	c.value, c.target = make([]int, len(rows)), make([]int, len(rows))
	obs := make([]*string, len(rows))
	for i, r := range rows {
		c.target[i] = int(r["target"].(float64))
		if c.target[i]%2 == 0 {
			s := "bb"
			obs[i] = &s
		}
	}
	return obs, nil
}

func (c *counters) Call(i int, method string, args map[string]any) (string, error) {
	if method != "add" {
		return "", errors.New("no method " + method)
	}
	c.value[i] += int(args["n"].(int64))
	return strconv.Itoa(c.value[i]), nil
}

func (c *counters) Rewards(n int) ([]float64, error) {
	out := make([]float64, n)
	for i := range out {
		if c.value[i] == c.target[i] {
			out[i] = 1
		}
	}
	return out, nil
}

// withCounters gives a tiny run the counters environment: conversational prompts (their letters
// the prompt ids), the add tool, its reward.
func withCounters(env *counters) func(*Setup) {
	return func(s *Setup) {
		var prompts []*Prompt
		for i, p := range tinyPrompts() {
			p.Source = data.Text{Messages: []chat.Message{{Role: "user", Content: p.Text}}}
			p.Columns = map[string]any{"target": float64(2 + i)}
			prompts = append(prompts, p)
		}
		s.Prompts, s.Decoder = prompts, toolLetters{add: true}
		e := &Environment{Env: env, Name: "counters", Methods: []string{"add"},
			Schemas: []json.RawMessage{json.RawMessage(`{"type": "function", "function": {"name": "add"}}`)}, HasReward: true,
			Render: func(msgs []chat.Message) (string, []int32, error) {
				text := msgs[len(msgs)-1].Content
				var ids []int32
				for _, ch := range text {
					ids = append(ids, int32(ch-'a'))
				}
				return text, ids, nil
			}}
		s.Environment = e
		s.Rewards = append(s.Rewards, e.reward())
	}
}

// An environment run: each generation batch resets an instance per rollout, a prompt whose
// instance answered grows by it, the model's add calls go to its rollout's own instance, and the
// environment's reward is logged; resumed in the middle of a generation batch it ends as the
// straight run does, bit for bit.
func TestGRPO_EnvironmentResumeEqualsStraight(t *testing.T) {
	config := func() *Config {
		c := tinyConfig(t)
		c.MaxSteps, c.NumIterations, c.MaxCompletionLength = 4, 2, 12
		return c
	}
	straight := config()
	env := &counters{}
	grown, adds := 0, 0
	want, err := toolsRun(t, straight, 0, func(s StepInfo) {
		r := s.Scored
		for i, p := range r.Prompts {
			target := int(p.Columns["target"].(float64)) // prompt k of tinyPrompts has target 2+k
			base := tinyPrompts()[target-2]
			want, wantIDs := base.Text, len(base.IDs)
			if target%2 == 0 {
				want, wantIDs = want+"bb", wantIDs+2
				grown++
			}
			if p.Text != want || len(p.IDs) != wantIDs {
				t.Errorf("step %d row %d: prompt %q (%d ids), want %q", s.Step, i, p.Text, len(p.IDs), want)
			}
			for _, m := range r.Conversations[i] {
				if m.Role == "tool" && strings.Contains(string(mustJSON(t, m)), `"name":"add"`) {
					adds++
				}
			}
		}
	}, withCounters(env))
	if err != nil {
		t.Fatal(err)
	}
	if grown == 0 || adds == 0 || env.resets == 0 {
		t.Errorf("%d grown prompts, %d add calls, %d resets: the test does not exercise the environment", grown, adds, env.resets)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(straight.OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[0].Metrics["rewards/counters/mean"]; !ok {
		t.Errorf("no rewards/counters/mean in %v", recs[0].Metrics)
	}
	c := config()
	if _, err := toolsRun(t, c, 1, nil, withCounters(&counters{})); !errors.Is(err, loop.ErrInterrupted) {
		t.Fatalf("interrupted run: %v", err)
	}
	resumed := config()
	resumed.OutputDir, resumed.Resume = c.OutputDir, true
	got, err := toolsRun(t, resumed, 0, nil, withCounters(&counters{}))
	if err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(got, want); d != 0 {
		t.Errorf("resumed run's weights differ from the straight run's by %g", d)
	}
	looptest.SameMetrics(t, filepath.Join(straight.OutputDir, runlog.MetricsName), filepath.Join(c.OutputDir, runlog.MetricsName))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The same loop in Llama 3.x's format: a turn ending in {"name": …, "parameters": …} runs the
// calculator, the ipython turn follows with mask 0 (TRL's suffix on Llama 3.1's template), and
// generation continues from there; the conversation keeps the text before the call as content.
func TestTools_Llama3Rollout(t *testing.T) {
	txt := fixtureText(t, "../../data/tokenizer/testdata/llama3", "../../models/encode/testdata/llama3_tools/chat_template.jinja")
	const eot = 128009
	enc, decode := codec(txt)
	turn := func(s string) generate.Generation {
		ids := append(enc(s), eot)
		return generate.Generation{IDs: ids, LogProbs: make([]float64, len(ids))}
	}
	set, err := tools.Lookup([]string{"calculator"})
	if err != nil {
		t.Fatal(err)
	}
	tt := &Tools{Set: set, Format: tools.Llama3, Suffix: txt.ToolSuffix}
	first := `Let me compute. {"name": "calculator", "parameters": {"expression": "4780*3328"}}`
	prompt := &encode.Prompt{IDs: enc("<|start_header_id|>user<|end_header_id|>\n\n4780*3328<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")}
	var contexts [][]int32
	gen := func(p []*encode.Prompt, o generate.Options) ([]generate.Generation, error) {
		contexts = append(contexts, p[0].IDs)
		return []generate.Generation{turn("15907840")}, nil
	}
	gens := []generate.Generation{turn(first)}
	res, err := tt.run(gen, []*encode.Prompt{prompt}, gens, generate.Options{MaxNewTokens: 100, Seed: 1}, decode, nil)
	if err != nil {
		t.Fatal(err)
	}
	suffix, err := txt.ToolSuffix([]chat.Message{encode.ToolMessage("calculator", "15907840")})
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(append(enc(first), eot), suffix...), append(enc("15907840"), eot)...)
	if !slices.Equal(gens[0].IDs, want) || res.calls != 1 || res.failures != 0 || len(contexts) != 1 {
		t.Fatalf("row %q (%d calls, %d failures, %d continuations)\nwant %q", decode(gens[0].IDs), res.calls, res.failures, len(contexts), decode(want))
	}
	// The ipython turn as Llama 3.1's template writes a string result: through tojson, quoted.
	if ctx := append(append(slices.Clone(prompt.IDs), append(enc(first), eot)...), suffix...); !slices.Equal(contexts[0], ctx) ||
		!strings.Contains(txt.Tokenizer.Decode(toInts(suffix), false), "<|start_header_id|>ipython<|end_header_id|>\n\n\"15907840\"<|eot_id|>") {
		t.Errorf("continued from %v\nwant %v", contexts[0], ctx)
	}
	for k, m := range res.mask[0] {
		inTool := k >= len(enc(first))+1 && k < len(enc(first))+1+len(suffix)
		if (m == 0) != inTool {
			t.Fatalf("mask[%d] = %g", k, m)
		}
	}
	conv := res.conversations[0]
	if len(conv) != 3 || conv[0].Content != "Let me compute." || conv[1].Role != "tool" || conv[2].Content != "15907840" || res.last[0] != "15907840" {
		t.Errorf("conversation %+v, last %q", conv, res.last[0])
	}
}

// The sampling gap per turn reads each of the model's turns: runs of 1s in the completion mask
// between tool turns (0s), the last mask gathering every later turn; padding is no turn.
func TestTurnMasks(t *testing.T) {
	mask := [][]float32{
		{1, 1, 0, 0, 1, 1, 0, 1, 0, 1},
		{0, 1, 0, 1, 1, 1, 1, 0, 0, 0},
		{1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
	}
	out := graphtest.Eval(t, func(in []*Node) []*Node { return TurnMasks(in[0], 3) }, mask)
	want := [][]float64{
		{1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		{0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
		{0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0},
	}
	for k := range want {
		if !slices.Equal(out[k], want[k]) {
			t.Errorf("turn %d: %v\nwant   %v", k+1, out[k], want[k])
		}
	}
}
