package grpo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tools"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/generate"
)

// Tools are what a multi-turn rollout needs (Setup.Tools): TRL 1.x's GRPOTrainer with tools=[…].
// After each generation the calls of a completion's last assistant turn are parsed (Format) and
// run (Set); their results, rendered as the chat template's tool turn and the next assistant
// header (Suffix), are appended to the completion, and generation continues from prompt +
// completion + tool turn, until a turn makes no call, max_tool_calling_iterations turns have run,
// or the next tool turn would take the completion past max_completion_length (that turn is then
// dropped and the completion ends as it is, as TRL rolls it back). The tool turns' tokens are part
// of the completion (the policy and reference score them) but carry no loss, KL, entropy or
// importance ratio: their mask is 0 (TRL's tool_mask), their sampled log-prob 0.
type Tools struct {
	Set    tools.Set
	Format tools.Format
	// Suffix renders tool messages into the token ids that follow the assistant turn
	// (encode.Text.ToolSuffix).
	Suffix func(msgs []chat.Message) ([]int32, error)
	// MaxIterations bounds the tool turns of a completion; 0 is no bound (TRL's None).
	MaxIterations int
}

// generateFn generates one continuation of each prompt (rollout.Generate on the trainer's
// generator; a script in tests).
type generateFn func(prompts []*encode.Prompt, opts generate.Options) ([]generate.Generation, error)

// toolTurns are the multi-turn results of a generation batch: each completion's tool mask (1 for
// the model's tokens, 0 for the tool turns'), its conversation (TRL's completion messages: each
// assistant turn with its tool_calls, each tool message), the text of its last assistant turn, and
// the counts TRL logs.
type toolTurns struct {
	mask            [][]float32
	conversations   [][]chat.Message
	last            []string
	calls, failures int
}

// assistantTurn is an assistant turn's message as TRL's response templates parse it: its content
// (tools.Content) and the calls with object arguments as tool_calls [{"type": "function",
// "function": {"name", "arguments"}}].
func assistantTurn(f tools.Format, text string, calls []tools.Call) chat.Message {
	content := tools.Content(f, text)
	if len(calls) > 0 {
		content = strings.TrimSuffix(content, "\n")
	}
	m := chat.Message{Role: "assistant", Content: content}
	var tc []map[string]any
	for _, c := range calls {
		if c.Err == "" {
			tc = append(tc, map[string]any{"type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
	}
	if len(tc) > 0 {
		b, _ := json.Marshal(tc)
		m.Extra = []chat.Field{{Key: "tool_calls", Value: b}}
	}
	return m
}

// run continues gens, the first turns of prompts' completions, through their tool calls (see
// Tools). gens are extended in place: IDs and LogProbs gain each tool turn (log-prob 0) and the
// next turn, Truncated is the last turn's, Text is left for the caller (toolTurns.last). Each
// round of continuations draws with seed + round (a row's draws depend on its row and its seed
// only, models/generate).
func (tt *Tools) run(gen generateFn, prompts []*encode.Prompt, gens []generate.Generation, opts generate.Options, decode func([]int32) string, env *Environment) (*toolTurns, error) {
	n := len(gens)
	res := &toolTurns{mask: make([][]float32, n), conversations: make([][]chat.Message, n), last: make([]string, n)}
	var active []int
	for i := range gens {
		res.mask[i] = ones(len(gens[i].IDs))
		res.last[i] = decode(gens[i].IDs)
		_, calls := tt.calls(i, res.last[i], env)
		res.conversations[i] = []chat.Message{assistantTurn(tt.Format, res.last[i], calls)}
		active = append(active, i)
	}
	maxLen, seed := opts.MaxNewTokens, opts.Seed
	for round := 1; len(active) > 0 && (tt.MaxIterations == 0 || round <= tt.MaxIterations); round++ {
		var next []int
		var ctx []*encode.Prompt
		var suffixes [][]int32
		budget := 0
		var toolMsgs [][]chat.Message
		for _, i := range active {
			set, calls := tt.calls(i, res.last[i], env)
			if len(calls) == 0 {
				continue
			}
			var msgs []chat.Message
			for _, c := range calls {
				content, failed := set.Run(c)
				res.calls++
				if failed {
					res.failures++
				}
				msgs = append(msgs, encode.ToolMessage(c.Name, content))
			}
			suffix, err := tt.Suffix(msgs)
			if err != nil {
				return nil, fmt.Errorf("tools: %w", err)
			}
			if len(gens[i].IDs)+len(suffix) > maxLen { // the tool turn does not fit: the completion ends here
				continue
			}
			ids := append(append(append([]int32{}, prompts[i].IDs...), gens[i].IDs...), suffix...)
			ctx = append(ctx, &encode.Prompt{IDs: ids})
			next, suffixes, toolMsgs = append(next, i), append(suffixes, suffix), append(toolMsgs, msgs)
			budget = max(budget, maxLen-len(gens[i].IDs)-len(suffix))
		}
		if len(next) == 0 {
			break
		}
		o := opts
		o.Seed, o.MaxNewTokens = seed+uint64(round)*1_000_003, max(1, budget)
		more, err := gen(ctx, o)
		if err != nil {
			return nil, err
		}
		active = active[:0]
		for k, i := range next {
			room := maxLen - len(gens[i].IDs) - len(suffixes[k])
			m := more[k]
			ids, lps := m.IDs[:min(len(m.IDs), room)], m.LogProbs[:min(len(m.IDs), room)]
			g := &gens[i]
			g.IDs = append(append(g.IDs, suffixes[k]...), ids...)
			g.LogProbs = append(append(g.LogProbs, make([]float64, len(suffixes[k]))...), lps...)
			g.Truncated = m.Truncated || len(ids) < len(m.IDs)
			res.mask[i] = append(append(res.mask[i], make([]float32, len(suffixes[k]))...), ones(len(ids))...)
			res.conversations[i] = append(res.conversations[i], toolMsgs[k]...)
			if len(ids) > 0 { // TRL adds no message for a turn cut to nothing
				res.last[i] = decode(ids)
				_, calls := tt.calls(i, res.last[i], env)
				res.conversations[i] = append(res.conversations[i], assistantTurn(tt.Format, res.last[i], calls))
				active = append(active, i)
			}
		}
	}
	return res, nil
}

// calls are the tool calls of rollout i's turn text, their string arguments cast by the schemas
// of the tools its prompt listed (tools.Set.Typed, as TRL 1.x passes the tools to the parser), and
// those tools: the run's, and the rollout's own environment instance's methods.
func (tt *Tools) calls(i int, text string, env *Environment) (tools.Set, []tools.Call) {
	set := tt.Set
	if env != nil {
		set = append(slices.Clone(set), env.tools(i)...)
	}
	return set, set.Typed(tools.Parse(tt.Format, text))
}

func ones(n int) []float32 {
	m := make([]float32, n)
	for i := range m {
		m[i] = 1
	}
	return m
}
