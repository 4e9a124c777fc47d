package gguf

import (
	"fmt"
	"slices"
	"strings"
)

// ollamaTemplate is the ollama form (a Go text/template over .Messages, ollama's own style) of
// one family of chat templates, recognised by its markers, and its end-of-turn stop tokens, as
// Unsloth's save_to_gguf writes them into its Modelfile (CHAT_TEMPLATES' *_ollama entries).
type ollamaTemplate struct {
	family  string
	markers []string
	text    string
	stops   []string
}

// ollamaTemplates: each renders what the family's chat template renders with
// add_generation_prompt after a user turn (a final assistant turn is left open, for
// continuation), without a template's default system prompt (TestModelfile_RendersLikeJinja).
var ollamaTemplates = []ollamaTemplate{
	{family: "ChatML (Qwen, SmolLM2)", markers: []string{"<|im_start|>", "<|im_end|>"}, stops: []string{"<|im_start|>", "<|im_end|>"},
		text: `{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
<|im_start|>{{ .Role }}
{{ .Content }}{{ if not (and $last (eq .Role "assistant")) }}<|im_end|>
{{ end }}
{{- if and $last (ne .Role "assistant") }}<|im_start|>assistant
{{ end }}
{{- end }}`},
	{family: "Llama 3", markers: []string{"<|start_header_id|>", "<|eot_id|>"}, stops: []string{"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
		text: `{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 -}}
<|start_header_id|>{{ .Role }}<|end_header_id|>

{{ .Content }}{{ if not (and $last (eq .Role "assistant")) }}<|eot_id|>{{ end }}
{{- if and $last (ne .Role "assistant") }}<|start_header_id|>assistant<|end_header_id|>

{{ end }}
{{- end }}`},
	{family: "Gemma", markers: []string{"<start_of_turn>", "<end_of_turn>"}, stops: []string{"<end_of_turn>"},
		text: `{{- range $i, $_ := .Messages }}
{{- $last := eq (len (slice $.Messages $i)) 1 }}
{{- if or (eq .Role "user") (eq .Role "system") }}<start_of_turn>user
{{ .Content }}<end_of_turn>
{{ if $last }}<start_of_turn>model
{{ end }}
{{- else if eq .Role "assistant" }}<start_of_turn>model
{{ .Content }}{{ if not $last }}<end_of_turn>
{{ end }}
{{- end }}
{{- end }}`},
}

// findOllamaTemplate returns the ollama form of a chat template, nil when none is known.
func findOllamaTemplate(chatTemplate string) *ollamaTemplate {
	for i, t := range ollamaTemplates {
		if !slices.ContainsFunc(t.markers, func(m string) bool { return !strings.Contains(chatTemplate, m) }) {
			return &ollamaTemplates[i]
		}
	}
	return nil
}

// stopTokens are the Modelfile's stop tokens: the template family's end-of-turn tokens and the
// tokenizer's eos token.
func stopTokens(chatTemplate, eos string) []string {
	var stops []string
	if t := findOllamaTemplate(chatTemplate); t != nil {
		stops = slices.Clone(t.stops)
	}
	if eos != "" && !slices.Contains(stops, eos) {
		stops = append(stops, eos)
	}
	return stops
}

// Modelfile is an ollama Modelfile for the GGUF file ggufName (written beside it): FROM, the
// TEMPLATE of the chat template's family and its PARAMETER stop lines. known is false when the
// chat template (or its absence) has no known ollama form: then there is no TEMPLATE line, and
// ollama falls back to its own detection from the GGUF's tokenizer.chat_template.
func Modelfile(ggufName string, e *Exported) (text string, family string, known bool) {
	var b strings.Builder
	fmt.Fprintf(&b, "FROM ./%s\n", ggufName)
	t := findOllamaTemplate(e.Template)
	if t != nil {
		fmt.Fprintf(&b, "TEMPLATE \"\"\"%s\"\"\"\n", t.text)
	}
	for _, s := range e.Stops {
		fmt.Fprintf(&b, "PARAMETER stop %q\n", s)
	}
	if t == nil {
		return b.String(), "", false
	}
	return b.String(), t.family, true
}
