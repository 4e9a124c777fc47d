// Package tools runs the tool calls of a model's completions in multi-turn GRPO rollouts, as TRL
// 1.x's GRPOTrainer does with `tools=[...]`: the calls are parsed from the completion in its chat
// template's format (Parse), each is run (Set.Run), and its result becomes a `tool` message; a
// malformed call, an unknown tool or a tool's error becomes the result text {'error': '…'} (TRL:
// str({"error": str(e)})) and counts as a failure.
package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Tool is one function a model may call.
type Tool interface {
	Name() string
	// Schema is the function's JSON schema as transformers' get_json_schema writes it
	// ({"type": "function", "function": {"name", "description", "parameters"}}): what the chat
	// template renders into the prompt.
	Schema() json.RawMessage
	// Call runs the tool on its keyword arguments and returns str() of its result.
	Call(args map[string]any) (string, error)
}

// Func is a tool given by its parts (a Python function in the tool worker: data/extreward).
type Func struct {
	FuncName   string
	FuncSchema json.RawMessage
	Run        func(args map[string]any) (string, error)
}

// Name is the function's name.
func (f *Func) Name() string { return f.FuncName }

// Schema is the function's schema.
func (f *Func) Schema() json.RawMessage { return f.FuncSchema }

// Call runs the function.
func (f *Func) Call(args map[string]any) (string, error) { return f.Run(args) }

// Builtin are the tools posttrain has built in, by name.
var Builtin = map[string]Tool{"calculator": Calculator{}}

// Set is the tools of a run, in order.
type Set []Tool

// BuiltinNames are the built-in tools' names, sorted.
func BuiltinNames() []string {
	known := make([]string, 0, len(Builtin))
	for k := range Builtin {
		known = append(known, k)
	}
	slices.Sort(known)
	return known
}

// Lookup returns the built-in tools named, in order, then more; an unknown name is an error
// listing the built-in ones, a name given twice an error naming it.
func Lookup(names []string, more ...Tool) (Set, error) {
	var s Set
	for _, n := range names {
		t, ok := Builtin[n]
		if !ok {
			return nil, fmt.Errorf("no tool %q (built in: %s)", n, strings.Join(BuiltinNames(), ", "))
		}
		s = append(s, t)
	}
	s = append(s, more...)
	for i, t := range s {
		if slices.ContainsFunc(s[:i], func(x Tool) bool { return x.Name() == t.Name() }) {
			return nil, fmt.Errorf("tool %q is given twice", t.Name())
		}
	}
	return s, nil
}

// Schemas are the tools' schemas, for the chat template's `tools`.
func (s Set) Schemas() []json.RawMessage {
	out := make([]json.RawMessage, len(s))
	for i, t := range s {
		out[i] = t.Schema()
	}
	return out
}

// Call is one parsed tool call: the function's name and its arguments (nil when malformed).
type Call struct {
	Name      string
	Arguments map[string]any
	// Err is why the call could not be parsed ("" for a well-formed call).
	Err string
}

// Run runs call and returns the tool message's content and whether it failed: the tool's result,
// or {'error': '…'} for a malformed call, an unknown tool or the tool's error.
func (s Set) Run(call Call) (content string, failed bool) {
	if call.Err != "" {
		return pyErrorDict(call.Err), true
	}
	i := slices.IndexFunc(s, func(t Tool) bool { return t.Name() == call.Name })
	if i < 0 {
		return pyErrorDict(fmt.Sprintf("Tool %s not found.", call.Name)), true
	}
	out, err := s[i].Call(call.Arguments)
	if err != nil {
		return pyErrorDict(err.Error()), true
	}
	return out, false
}

// pyErrorDict is Python's str({"error": msg}).
func pyErrorDict(msg string) string { return "{'error': " + pyStr(msg) + "}" }

// pyStr is Python's repr of a str: single quotes unless the text holds one and no double quote.
func pyStr(s string) string {
	q := "'"
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		q = `"`
	}
	var b strings.Builder
	b.WriteString(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case string(r) == q:
			b.WriteString(`\` + q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteString(q)
	return b.String()
}

// Format is how a chat template writes tool calls.
type Format string

// Hermes is Qwen2.5's and Qwen3's: each call a JSON object {"name": …, "arguments": {…}} between
// <tool_call> and </tool_call>, after the turn's text (TRL's qwen3 response schema).
const Hermes Format = "hermes"

// Llama3 is Llama 3.1's and 3.2's: one call per turn, a bare JSON object {"name": …,
// "parameters": {…}} ending the turn (TRL's llama3 response template).
const Llama3 Format = "llama3"

// FormatOf is the tool-call format of a model family (config.json's model_type) and its chat
// template's source, or an error naming the formats there are: Qwen2.5's and Qwen3's <tool_call>
// JSON for qwen2 and qwen3; for llama, Llama 3.1/3.2-Instruct's JSON calls where the template
// renders them (its "parameters" calls and ipython tool turns, as TRL 1.x recognises those two
// templates). Other templates of the llama family (SmolLM2's has no tools) and other families are
// refused.
func FormatOf(modelType, template string) (Format, error) {
	switch {
	case modelType == "qwen2" || modelType == "qwen3":
		return Hermes, nil
	case modelType == "llama" && strings.Contains(template, `"parameters": `) && strings.Contains(template, "<|start_header_id|>ipython<|end_header_id|>"):
		return Llama3, nil
	case modelType == "llama":
		return "", fmt.Errorf("tool calls are parsed in Llama 3.1/3.2-Instruct's format for the llama family, and this model's chat template does not render it (no \"parameters\" calls and ipython tool turns; SmolLM2's has no tools at all)")
	}
	return "", fmt.Errorf("tool calls are parsed in Qwen2.5's and Qwen3's format (<tool_call> JSON; qwen2 and qwen3 models) and Llama 3.1/3.2-Instruct's (llama models with that chat template), not for %s", modelType)
}

// llama3Call opens a Llama 3.x call: TRL's llama3 response template's open pattern.
var llama3Call = regexp.MustCompile(`\{"name":\s*"([^"]+)",\s*"parameters":\s*`)

// parseLlama3 reads a Llama 3.x turn as transformers 5.x parses it with TRL's llama3 response
// template: text, then at most one call, {"name": "…", "parameters": V} with V one JSON value,
// ending the turn (its <|eot_id|>, stripped from the text here). Anything else, a call that does
// not parse included, is no call (TRL falls back to the plain text).
func parseLlama3(text string) []Call {
	m := llama3Call.FindStringSubmatchIndex(text)
	if m == nil {
		return nil
	}
	body := strings.TrimRightFunc(text[m[1]:], unicode.IsSpace)
	body, ok := strings.CutSuffix(body, "}")
	if !ok {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil
	}
	name := text[m[2]:m[3]]
	args, ok := v.(map[string]any)
	if !ok {
		return []Call{{Name: name, Err: fmt.Sprintf("Malformed tool call (parameters is not an object): %s", oneLine(body, 200))}}
	}
	return []Call{{Name: name, Arguments: numbers(args)}}
}

// Content is what TRL's response templates parse as the content of a turn in format f: with
// calls, the text around them (Hermes: outside the <tool_call> blocks; Llama 3.x: before the
// call), trimmed; without, the text as it is.
func Content(f Format, text string) string {
	if len(Parse(f, text)) == 0 {
		return text
	}
	if f == Llama3 {
		return strings.TrimSpace(text[:llama3Call.FindStringIndex(text)[0]])
	}
	var b strings.Builder
	for {
		i := strings.Index(text, "<tool_call>")
		j := strings.Index(text, "</tool_call>")
		if i < 0 || j < i {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:i])
		text = text[j+len("</tool_call>"):]
	}
	return strings.TrimSpace(b.String())
}

// Parse returns the tool calls of an assistant turn's text in format f (none when it has none),
// as transformers 5.24 parses them with TRL 1.16's response templates. Hermes: each closed
// <tool_call>…</tool_call> block (an unclosed one, a turn cut at max_completion_length, is no
// call); a block whose JSON does not parse or that has no string "name" makes the whole turn
// plain text, no call at all (TRL's fallback). Arguments that are not an object are a call with
// Err set (TRL would call the tool with them, which fails).
func Parse(f Format, text string) []Call {
	if f == Llama3 {
		return parseLlama3(text)
	}
	const open, close = "<tool_call>", "</tool_call>"
	var calls []Call
	for {
		i := strings.Index(text, open)
		if i < 0 {
			return calls
		}
		text = text[i+len(open):]
		j := strings.Index(text, close)
		if j < 0 {
			return calls
		}
		c, ok := parseJSONCall(strings.TrimSpace(text[:j]))
		if !ok {
			return nil
		}
		calls = append(calls, c)
		text = text[j+len(close):]
	}
}

// parseJSONCall reads a <tool_call> block's JSON: ok is false where TRL's parser fails (not one
// JSON object, or no string "name").
func parseJSONCall(body string) (Call, bool) {
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || dec.More() {
		return Call{}, false
	}
	name, ok := obj["name"].(string)
	if !ok || name == "" {
		return Call{}, false
	}
	args := map[string]any{}
	switch a := obj["arguments"].(type) {
	case map[string]any:
		args = a
	case nil:
	default:
		return Call{Name: name, Err: fmt.Sprintf("Malformed tool call (arguments is not an object): %s", oneLine(body, 200))}, true
	}
	return Call{Name: name, Arguments: numbers(args)}, true
}

// numbers makes args' top-level JSON numbers Go numbers.
func numbers(args map[string]any) map[string]any {
	for k, v := range args {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				args[k] = i
			} else if f, err := n.Float64(); err == nil {
				args[k] = f
			}
		}
	}
	return args
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
