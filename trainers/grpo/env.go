package grpo

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tools"
)

// Env is an environment's instances (TRL 1.x's environment_factory; data/extreward's PyEnv): one
// per rollout of a generation batch, by its index.
type Env interface {
	// Reset resets instance i with rows[i] and returns its observation (nil for none).
	Reset(rows []map[string]any) ([]*string, error)
	// Call runs method of instance i.
	Call(i int, method string, args map[string]any) (string, error)
	// Rewards are instances 0..n-1's own rewards (NaN for none).
	Rewards(n int) ([]float64, error)
}

// Environment is a run's environment (Setup.Environment): before each generation batch every
// rollout's instance is reset with the rollout's dataset row (its columns and its prompt, TRL's
// reset(**row)); an observation it returns is appended to the content of the prompt's last
// message, and the prompt is rendered again (Render: the chat template with the run's tool
// schemas). Its Methods are the rollout's tools, called on its own instance (the completion's
// tool calls, as Tools runs them); Schemas are theirs.
type Environment struct {
	Env     Env
	Name    string
	Methods []string
	Schemas []json.RawMessage
	// HasReward: the class defines get_reward, one more reward source (reward).
	HasReward bool
	// Render renders and tokenizes a conversational prompt.
	Render func(msgs []chat.Message) (text string, ids []int32, err error)
}

// reset resets the environment's instances for prompts (one rollout each) and returns the
// prompts the rollouts generate from: a prompt whose instance gave an observation is a new one,
// its last message's content extended with it.
func (e *Environment) reset(prompts []*Prompt) ([]*Prompt, error) {
	rows := make([]map[string]any, len(prompts))
	for i, p := range prompts {
		row := maps.Clone(p.Columns)
		if row == nil {
			row = map[string]any{}
		}
		if p.Source.Conversational() {
			row["prompt"] = p.Source.Messages
		} else {
			row["prompt"] = p.Source.String
		}
		rows[i] = row
	}
	obs, err := e.Env.Reset(rows)
	if err != nil {
		return nil, fmt.Errorf("environment %s: %w", e.Name, err)
	}
	out := slices.Clone(prompts)
	for i, o := range obs {
		if o == nil {
			continue
		}
		p := prompts[i]
		if !p.Source.Conversational() || len(p.Source.Messages) == 0 {
			return nil, fmt.Errorf("environment %s: reset returned an observation for a prompt that is not a conversation", e.Name)
		}
		msgs := slices.Clone(p.Source.Messages)
		msgs[len(msgs)-1].Content += *o
		text, ids, err := e.Render(msgs)
		if err != nil {
			return nil, fmt.Errorf("environment %s: prompt with the observation: %w", e.Name, err)
		}
		out[i] = &Prompt{Text: text, IDs: ids, Columns: p.Columns, Source: data.Text{Messages: msgs}, Line: p.Line}
	}
	return out, nil
}

// reward is the environment's own reward (TRL 1.x: get_reward() of each rollout's instance after
// its generation, weight 1, named after the class).
func (e *Environment) reward() Reward {
	return Reward{Name: e.Name, Weight: 1, Func: func(_, completions []string, _ map[string][]any) ([]float64, error) {
		return e.Env.Rewards(len(completions))
	}}
}

// tools are rollout i's environment tools: its instance's methods.
func (e *Environment) tools(i int) []tools.Tool {
	out := make([]tools.Tool, len(e.Methods))
	for k, m := range e.Methods {
		out[k] = &tools.Func{FuncName: m, FuncSchema: e.Schemas[k], Run: func(args map[string]any) (string, error) { return e.Env.Call(i, m, args) }}
	}
	return out
}
