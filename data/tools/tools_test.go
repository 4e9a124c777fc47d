package tools

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// The calculator gives str(eval(expression)) of Python 3 (values printed by python3).
func TestCalculator_AsPythonEval(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{"1234 * 5678", "7006652"},
		{"48213*9127", "440040051"},
		{"7/2", "3.5"},
		{"6/3", "2.0"},
		{"-2**2", "-4"},
		{"2**-1", "0.5"},
		{"2**10", "1024"},
		{"(3+4)*5", "35"},
		{"17//5", "3"},
		{"-17//5", "-4"},
		{"17%-5", "-3"},
		{"17//-5", "-4"},
		{"-17//-5", "3"},
		{"-17%-5", "-2"},
		{"7//-2", "-4"},
		{"-7//2", "-4"},
		{"-17%5", "3"},
		{"7.5//2", "3.0"},
		{"-7.5%2", "0.5"},
		{"1e3+1", "1001.0"},
		{"0.1+0.2", "0.30000000000000004"},
		{"12345678901234567890*98765432109876543210", "1219326311370217952237463801111263526900"},
		{"3 - -2", "5"},
		{"+4", "4"},
		{"2**3**2", "512"},
		{"1_000*3", "3000"},
		{"10/4*2", "5.0"},
		{"8 // 3 * 3 + 8 % 3", "8"},
	} {
		got, err := Calculator{}.Call(map[string]any{"expression": c.expr})
		if err != nil || got != c.want {
			t.Errorf("%s = %q (%v), want %q", c.expr, got, err, c.want)
		}
	}
	for _, c := range []struct {
		args map[string]any
		err  string
	}{
		{map[string]any{"expression": "1/0"}, "division by zero"},
		{map[string]any{"expression": "5//0"}, "integer division or modulo by zero"},
		{map[string]any{"expression": "(1+2"}, "'(' was never closed"},
		{map[string]any{"expression": "2 +"}, "invalid syntax"},
		{map[string]any{"expression": "__import__('os')"}, "invalid syntax"},
		{map[string]any{"expression": "9**9**9"}, "too large"},
		{map[string]any{}, "missing 1 required positional argument: 'expression'"},
		{map[string]any{"expr": "1"}, "unexpected keyword argument 'expr'"},
	} {
		if _, err := (Calculator{}).Call(c.args); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.err)
		}
	}
	var schema map[string]any
	if err := json.Unmarshal(Calculator{}.Schema(), &schema); err != nil || schema["type"] != "function" {
		t.Errorf("schema %s: %v", Calculator{}.Schema(), err)
	}
}

// Calls are read from closed <tool_call> JSON blocks (an unclosed one is none); unknown tools, a
// tool's error and arguments that are not an object become {'error': '…'} results (Python's str
// of TRL's {"error": str(e)}) and count as failures.
func TestParseAndRun(t *testing.T) {
	text := "Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"48213*9127\"}}\n</tool_call>\n" +
		"<tool_call>\n{\"name\": \"weather\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"1/0\"}}\n</tool_call>" +
		"<tool_call>{\"name\": \"calculator\", \"arguments\": \"2+2\"}</tool_call><tool_call>{\"name\": \"calculator\", \"arguments\": {\"expression\": \"2+2\"}}"
	calls := Parse(Hermes, text)
	set, err := Lookup([]string{"calculator"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		content string
		failed  bool
	}{
		{"440040051", false},
		{"{'error': 'Tool weather not found.'}", true},
		{"{'error': 'division by zero'}", true},
		{`{'error': 'Malformed tool call (arguments is not an object): {"name": "calculator", "arguments": "2+2"}'}`, true},
	}
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d: %+v", len(calls), len(want), calls)
	}
	for i, c := range calls {
		content, failed := set.Run(c)
		if content != want[i].content || failed != want[i].failed {
			t.Errorf("call %d %+v: %q failed=%v, want %q %v", i, c, content, failed, want[i].content, want[i].failed)
		}
	}
	if got := Parse(Hermes, "The answer is 42."); len(got) != 0 {
		t.Errorf("no call: %+v", got)
	}
	if _, err := Lookup([]string{"calculator", "search"}); err == nil || !strings.Contains(err.Error(), `no tool "search" (built in: calculator)`) {
		t.Errorf("unknown tool: %v", err)
	}
	if got := pyStr(`it's`); got != `"it's"` {
		t.Errorf("pyStr: %s", got)
	}
	if _, err := FormatOf("gemma3_text", ""); err == nil || !strings.Contains(err.Error(), "not for gemma3_text") {
		t.Errorf("gemma3_text: %v", err)
	}
}

// Llama 3.x calls are read as TRL 1.16 reads them (models/encode/testdata/llama3_tools/golden.json:
// trl.chat_template_utils.parse_response with TRL's llama3 response template, transformers
// 5.24.0, as GRPOTrainer's tool loop calls it): the one call that ends a turn, text before it kept
// as the content, and no call at all for a call that does not parse, two calls in a turn, or
// "arguments" in place of "parameters" (TRL falls back to the plain text). Parameters that are not
// an object are a call TRL would make and fail; here it is a failed call at once.
func TestParse_Llama3AsTRL(t *testing.T) {
	parsesAsTRL(t, Llama3, "../../models/encode/testdata/llama3_tools/golden.json")
	smol := `{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}`
	if _, err := FormatOf("llama", smol); err == nil || !strings.Contains(err.Error(), "SmolLM2's has no tools") {
		t.Errorf("a llama model without Llama 3.1's template: %v", err)
	}
}

// Qwen2.5's <tool_call> blocks are read as TRL 1.16 reads them (data/tools/testdata/qwen25_parse.json:
// parse_response with TRL's qwen3 response template on Qwen2.5's template, transformers 5.24.0,
// given the calculator and a weather tool with typed parameters): every closed block a call, its
// string arguments cast by the tool's schema (Typed), the text around them the content; one block
// that does not parse, or has no name, makes the whole turn plain text.
func TestParse_HermesAsTRL(t *testing.T) {
	parsesAsTRL(t, Hermes, "testdata/qwen25_parse.json")
}

// parsesAsTRL holds Parse (then Typed, with the golden's tools) and Content in format f to every
// turn of a golden written by scripts/reference/llama3_tools.py: its calls, their names and
// arguments (where TRL's are not an object, the call must fail), and the turn's content.
func parsesAsTRL(t *testing.T, f Format, golden string) {
	t.Helper()
	raw, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Tools []json.RawMessage `json:"tools"`
		Parse []struct {
			Text      string `json:"text"`
			Content   string `json:"content"`
			ToolCalls []struct {
				Name      string `json:"name"`
				Arguments any    `json:"arguments"`
			} `json:"tool_calls"`
		} `json:"parse"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Parse) < 10 {
		t.Fatalf("%s: %d cases", golden, len(g.Parse))
	}
	var set Set // the tools the prompt listed: string arguments are cast by their schemas
	for _, schema := range g.Tools {
		var s struct {
			Function struct{ Name string } `json:"function"`
		}
		if err := json.Unmarshal(schema, &s); err != nil {
			t.Fatal(err)
		}
		set = append(set, &Func{FuncName: s.Function.Name, FuncSchema: schema})
	}
	for _, c := range g.Parse {
		calls := set.Typed(Parse(f, c.Text))
		if len(calls) != len(c.ToolCalls) {
			t.Errorf("%q: %d calls %+v, TRL %d", c.Text, len(calls), calls, len(c.ToolCalls))
			continue
		}
		for k, want := range c.ToolCalls {
			got := calls[k]
			if got.Name != want.Name {
				t.Errorf("%q: call %d name %q, TRL %q", c.Text, k, got.Name, want.Name)
			}
			if args, ok := want.Arguments.(map[string]any); ok {
				gb, _ := json.Marshal(got.Arguments)
				wb, _ := json.Marshal(args)
				if got.Err != "" || string(gb) != string(wb) {
					t.Errorf("%q: call %d arguments %s (%s), TRL %s", c.Text, k, gb, got.Err, wb)
				}
			} else if got.Err == "" {
				t.Errorf("%q: arguments %v are not an object, and the call did not fail", c.Text, want.Arguments)
			}
		}
		if got := Content(f, c.Text); got != c.Content {
			t.Errorf("%q: content %q, TRL %q", c.Text, got, c.Content)
		}
	}
}
