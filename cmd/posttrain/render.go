package main

// `posttrain render`: a conversation rendered with the model's own chat template, byte for byte
// what transformers' apply_chat_template(..., tokenize=False) gives.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data/chat"
)

// renderConfig holds the flags of `posttrain render`.
type renderConfig struct {
	Tokenizer           string // tokenizer_config.json, a model directory, or a tokenizer.json beside one
	Messages            string // JSON: an array of messages, or an object with "messages" (and "tools")
	Tools               string // JSON array of tool schemas; overrides the messages file's "tools"
	AddGenerationPrompt bool
	Vars                []string // KEY=JSON template variables, e.g. enable_thinking=false
	Spans               bool     // print JSON with the assistant spans instead of the text
}

func init() {
	addCommand(&cli.Command{
		Name:  "render",
		Usage: "render a conversation with the model's chat template (as transformers' apply_chat_template)",
		// A --var value is JSON, commas included: one flag, one value.
		DisableSliceFlagSeparator: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tokenizer", Required: true, Usage: "tokenizer_config.json, or a model directory holding one"},
			&cli.StringFlag{Name: "messages", Required: true, Usage: `JSON file: an array of {"role","content"} messages, or {"messages": [...], "tools": [...]}`},
			&cli.BoolFlag{Name: "add-generation-prompt", Usage: "end with the assistant turn's opening, as for generation"},
			&cli.StringFlag{Name: "tools", Usage: "JSON file: an array of tool (function) schemas"},
			&cli.StringSliceFlag{Name: "var", Usage: "extra template variable KEY=JSON (repeatable), e.g. enable_thinking=false"},
			&cli.BoolFlag{Name: "spans", Usage: "print JSON {text, spans} with the byte ranges of assistant turns (completion-only loss)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			c := renderConfig{Tokenizer: cmd.String("tokenizer"), Messages: cmd.String("messages"), Tools: cmd.String("tools"),
				AddGenerationPrompt: cmd.Bool("add-generation-prompt"), Vars: cmd.StringSlice("var"), Spans: cmd.Bool("spans")}
			out, err := runRender(c)
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			_, err = cmd.Root().Writer.Write([]byte(out))
			return err
		},
	})
}

// runRender loads the template and the conversation and returns what to print.
func runRender(c renderConfig) (string, error) {
	tpl, err := chat.Load(c.Tokenizer)
	if err != nil {
		return "", err
	}
	msgs, tools, err := readConversation(c.Messages)
	if err != nil {
		return "", err
	}
	if c.Tools != "" {
		raw, err := os.ReadFile(c.Tools)
		if err != nil {
			return "", err
		}
		tools = nil
		if err := json.Unmarshal(raw, &tools); err != nil || tools == nil {
			return "", fmt.Errorf("%s: want a JSON array of tool schemas", c.Tools)
		}
	}
	opt := chat.Options{AddGenerationPrompt: c.AddGenerationPrompt, Tools: tools, Vars: map[string]any{}}
	for _, kv := range c.Vars {
		k, v, ok := strings.Cut(kv, "=")
		var val any
		if !ok || k == "" || json.Unmarshal([]byte(v), &val) != nil {
			return "", fmt.Errorf("--var %q: want KEY=JSON, e.g. enable_thinking=false", kv)
		}
		opt.Vars[k] = val
	}
	if !c.Spans {
		return tpl.Render(msgs, opt)
	}
	text, spans, err := tpl.AssistantSpans(msgs, opt)
	if err != nil {
		return "", err
	}
	out := struct {
		Text  string           `json:"text"`
		Spans []map[string]any `json:"spans"`
	}{Text: text, Spans: []map[string]any{}}
	for _, s := range spans {
		out.Spans = append(out.Spans, map[string]any{"message": s.Message, "start": s.Start, "end": s.End, "text": text[s.Start:s.End]})
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	err = enc.Encode(out)
	return b.String(), err
}

// readConversation reads an array of messages, or an object with "messages" and optional "tools".
func readConversation(path string) ([]chat.Message, []json.RawMessage, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	var conv struct {
		Messages []chat.Message    `json:"messages"`
		Tools    []json.RawMessage `json:"tools"`
	}
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		err = json.Unmarshal(trimmed, &conv.Messages)
	} else {
		err = json.Unmarshal(trimmed, &conv)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(conv.Messages) == 0 {
		return nil, nil, fmt.Errorf("%s: no messages (want an array of messages or {\"messages\": [...]})", path)
	}
	for i, m := range conv.Messages {
		if err := m.Validate(); err != nil {
			return nil, nil, fmt.Errorf("%s: message %d: %w", path, i, err)
		}
	}
	return conv.Messages, conv.Tools, nil
}
