package encode

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/posttrain/posttrain/data/chat"
)

// A multi-turn rollout (GRPO with tools) continues a completion with the tool messages its calls
// produced, rendered by the chat template as TRL 1.x's GRPOTrainer renders them
// (_get_tool_suffix_ids): the ids that a conversation [user, assistant with tool_calls] gains when
// the tool messages and the generation prompt follow, the assistant turn ending at the EOS (a
// template's "\n" after it belongs to the suffix). That needs a prefix-preserving template: one
// that renders the earlier turns the same whatever follows (TRL's
// is_chat_template_prefix_preserving; Qwen3's is not, as it drops the last turn's empty
// <think> block once a tool turn follows).

// toolDummy is the conversation a tool suffix is cut from: a user turn and an assistant turn
// calling tool name with no arguments (TRL uses the real name: some templates derive the tool
// turn's header from it).
func toolDummy(name string) []chat.Message {
	calls, _ := json.Marshal([]map[string]any{{"type": "function", "function": map[string]any{"name": name, "arguments": map[string]any{}}}})
	return []chat.Message{{Role: "user", Content: "dummy"}, {Role: "assistant", Content: "", Extra: []chat.Field{{Key: "tool_calls", Value: calls}}}}
}

// ToolMessage is a tool turn: the tool's name and its result text.
func ToolMessage(name, content string) chat.Message {
	n, _ := json.Marshal(name)
	return chat.Message{Role: "tool", Content: content, Extra: []chat.Field{{Key: "name", Value: n}}}
}

// ToolSuffix returns the token ids that follow an assistant turn whose tool calls gave msgs (tool
// messages, at least one): the template's tool turn(s) and the next assistant header.
func (t *Text) ToolSuffix(msgs []chat.Message) ([]int32, error) {
	if t.Template == nil {
		return nil, errNoTemplate
	}
	if len(msgs) == 0 {
		return nil, errors.New("tool suffix: no tool message")
	}
	name := ""
	for _, f := range msgs[0].Extra {
		if f.Key == "name" {
			_ = json.Unmarshal(f.Value, &name)
		}
	}
	dummy := toolDummy(name)
	prefixText, err := t.Template.Render(dummy, chat.Options{})
	if err != nil {
		return nil, fmt.Errorf("tool suffix: %w", err)
	}
	fullText, err := t.Template.Render(append(slices.Clone(dummy), msgs...), chat.Options{AddGenerationPrompt: true})
	if err != nil {
		return nil, fmt.Errorf("tool suffix: %w", err)
	}
	prefix, full := t.Tokenizer.Encode(prefixText), t.Tokenizer.Encode(fullText)
	if _, eos, err := t.EOS(); err == nil {
		for i := len(prefix) - 1; i >= 0; i-- {
			if prefix[i] == eos {
				prefix = prefix[:i+1]
				break
			}
		}
	}
	if len(full) < len(prefix) || !slices.Equal(full[:len(prefix)], prefix) {
		return nil, errors.New("the chat template is not prefix-preserving: the assistant turn renders differently once a tool turn follows (Qwen3's drops its <think> block), so a tool result cannot be appended to a completion; use a template that renders earlier turns the same whatever follows (Qwen2.5's)")
	}
	out := make([]int32, len(full)-len(prefix))
	for i, id := range full[len(prefix):] {
		out[i] = int32(id)
	}
	return out, nil
}
