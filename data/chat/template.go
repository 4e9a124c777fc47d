// Package chat renders a model's own Jinja chat template (tokenizer_config.json's chat_template)
// byte-identically to transformers' apply_chat_template, finds which characters and tokens of a
// rendered conversation belong to assistant turns (completion-only loss without {% generation %}
// tags), and checks tokenized conversations for doubled special tokens (TRL #4481, #1591).
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Template is a compiled chat template plus the special tokens transformers passes to it.
type Template struct {
	Source string
	// Special holds the special-token template variables (bos_token, eos_token, pad_token,
	// unk_token, sep_token, cls_token, mask_token) that are set; unset ones stay undefined, as in
	// transformers.
	Special map[string]string
	// Additional is additional_special_tokens, passed to the template when set (as transformers'
	// special_tokens_map does).
	Additional []string
	tpl        *exec.Template
}

// Config is the part of tokenizer_config.json a chat template needs.
type Config struct {
	ChatTemplate json.RawMessage   `json:"chat_template"` // a string, or a list of {name, template}
	BOSToken     json.RawMessage   `json:"bos_token"`     // a string, null, or an AddedToken object
	EOSToken     json.RawMessage   `json:"eos_token"`
	PadToken     json.RawMessage   `json:"pad_token"`
	UNKToken     json.RawMessage   `json:"unk_token"`
	SEPToken     json.RawMessage   `json:"sep_token"`
	CLSToken     json.RawMessage   `json:"cls_token"`
	MaskToken    json.RawMessage   `json:"mask_token"`
	Additional   []json.RawMessage `json:"additional_special_tokens"`
}

// Load reads the chat template of a tokenizer_config.json, of the one inside a model directory,
// or of the one beside a tokenizer.json; a chat_template.jinja in the same directory wins. A
// template named "default" is used when chat_template is a list of named templates.
func Load(path string) (*Template, error) { return load(path, "") }

// LoadWithSource is Load with the template source src in place of the config's own (SFT's
// chat_template_path): the special-token variables still come from path's tokenizer_config.json,
// as transformers renders a template set on a tokenizer with that tokenizer's special tokens.
func LoadWithSource(path, src string) (*Template, error) {
	if src == "" {
		return nil, errors.New("load chat template: empty template source")
	}
	return load(path, src)
}

func load(path, src string) (*Template, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer_config.json")
	} else if b := filepath.Base(path); b == "tokenizer.json" || b == "tokenizer.json.gz" {
		path = filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load chat template: %w", err)
	}
	var c Config
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("load chat template %s: %w", path, err)
	}
	// Newer transformers save the template beside the config as chat_template.jinja, which then
	// takes precedence over the config's chat_template.
	if src == "" {
		if src, err = templateSource(c.ChatTemplate); err != nil && !hasJinja(path) {
			return nil, fmt.Errorf("load chat template %s: %w", path, err)
		}
		if jinja, jerr := os.ReadFile(filepath.Join(filepath.Dir(path), "chat_template.jinja")); jerr == nil {
			src = string(jinja)
		}
	}
	special := map[string]string{}
	for name, raw := range map[string]json.RawMessage{"bos_token": c.BOSToken, "eos_token": c.EOSToken,
		"pad_token": c.PadToken, "unk_token": c.UNKToken, "sep_token": c.SEPToken, "cls_token": c.CLSToken,
		"mask_token": c.MaskToken} {
		tok, err := tokenString(raw)
		if err != nil {
			return nil, fmt.Errorf("load chat template %s: %s: %w", path, name, err)
		}
		if tok != "" {
			special[name] = tok
		}
	}
	t, err := Parse(src, special)
	if err != nil {
		return nil, fmt.Errorf("load chat template %s: %w", path, err)
	}
	for i, raw := range c.Additional {
		tok, err := tokenString(raw)
		if err != nil {
			return nil, fmt.Errorf("load chat template %s: additional_special_tokens[%d]: %w", path, i, err)
		}
		t.Additional = append(t.Additional, tok)
	}
	return t, nil
}

// hasJinja reports whether a chat_template.jinja lies beside the config at path.
func hasJinja(path string) bool {
	_, err := os.Stat(filepath.Join(filepath.Dir(path), "chat_template.jinja"))
	return err == nil
}

func templateSource(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", errors.New("no chat_template")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template must be a string or a list of {name, template}")
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", errors.New(`chat_template list has no "default" template`)
}

// tokenString reads a special token given as a string, null, or {"content": ...}.
func tokenString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct{ Content string }
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("want a string or an AddedToken object")
	}
	return obj.Content, nil
}

// Parse compiles a Jinja chat template. special sets template variables such as eos_token.
func Parse(src string, special map[string]string) (_ *Template, err error) {
	defer func() {
		if r := recover(); r != nil { // gonja's parser panics on some malformed templates
			err = fmt.Errorf("parse chat template: malformed template (%v)", r)
		}
	}()
	cfg := newConfig()
	gonjaSrc, err := rewriteNestedIfs(src, cfg)
	if err != nil {
		return nil, err
	}
	tpl, err := exec.NewTemplate("chat_template", cfg, &rootLoader{id: "chat_template", src: gonjaSrc}, newEnvironment())
	if err != nil {
		return nil, fmt.Errorf("parse chat template: %w", err)
	}
	return &Template{Source: src, Special: special, tpl: tpl}, nil
}

// Options are apply_chat_template's keyword arguments.
type Options struct {
	AddGenerationPrompt bool
	// Tools are JSON schemas (each one JSON object), passed as `tools`; nil means None.
	Tools []json.RawMessage
	// Vars are extra template variables (e.g. "enable_thinking": false); JSON-compatible Go values.
	Vars map[string]any
}

// Render renders msgs as transformers' apply_chat_template(msgs, tokenize=False, ...) does.
// A render is bounded (limits.go): macro nesting (MaxMacroDepth), macro calls plus range()
// elements (MaxRenderSteps), output size (MaxRenderOutput) and time (MaxRenderTime); past one it
// returns a one-line error naming the bound. Past MaxRenderTime the render's goroutine is
// abandoned, not stopped: it fails at its next macro call or range(), but work gonja does with no
// hook (a loop over a huge list, string repetition) runs on until it ends or the process exits
// (for the CLI, at once).
func (t *Template) Render(msgs []Message, opt Options) (string, error) {
	vars, err := t.vars(msgs, opt)
	if err != nil {
		return "", err
	}
	b := &budget{lim: limits}
	vars[budgetKey] = b
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		out, err := t.render(vars, b)
		done <- result{out, err}
	}()
	timer := time.NewTimer(b.lim.time)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.out, r.err
	case <-timer.C:
		b.stop.Store(true)
		return "", fmt.Errorf("render chat template: took longer than %v (an endless or huge loop?)", b.lim.time)
	}
}

// render is Render's work, on its own goroutine.
func (t *Template) render(vars map[string]any, b *budget) (_ string, err error) {
	defer func() {
		if r := recover(); r != nil { // a gonja bug must not take the process down
			err = fmt.Errorf("render chat template: %v", r)
		}
	}()
	// raise_exception is bound per call so the message survives gonja's error wrapping.
	var raised *TemplateError
	vars["raise_exception"] = func(msg string) (string, error) {
		raised = &TemplateError{Msg: msg}
		return "", raised
	}
	out := &limitWriter{b: b}
	err = t.tpl.Execute(out, exec.NewContext(vars))
	if raised != nil {
		return "", raised
	}
	if b.err != nil { // a bound was hit; gonja may have carried on past the error value
		return "", b.err
	}
	if err != nil {
		return "", fmt.Errorf("render chat template: %w", err)
	}
	return out.out.String(), nil
}

func (t *Template) vars(msgs []Message, opt Options) (map[string]any, error) {
	vars := map[string]any{}
	keys := make([]string, 0, len(opt.Vars))
	for k := range opt.Vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		raw, err := json.Marshal(opt.Vars[k])
		if err != nil {
			return nil, fmt.Errorf("template variable %s: %w", k, err)
		}
		if vars[k], err = decodeJSON(raw); err != nil {
			return nil, fmt.Errorf("template variable %s: %w", k, err)
		}
	}
	for k, v := range t.Special {
		vars[k] = v
	}
	if len(t.Additional) > 0 {
		add := make([]any, len(t.Additional))
		for i, s := range t.Additional {
			add[i] = s
		}
		vars["additional_special_tokens"] = add
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		v, err := m.templateValue()
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		list[i] = v
	}
	vars["messages"] = list
	vars["add_generation_prompt"] = opt.AddGenerationPrompt
	vars["documents"] = nil
	vars["tools"] = nil
	if opt.Tools != nil {
		tools := make([]any, len(opt.Tools))
		for i, raw := range opt.Tools {
			v, err := decodeJSON(raw)
			if err != nil {
				return nil, fmt.Errorf("tool %d: %w", i, err)
			}
			tools[i] = v
		}
		vars["tools"] = tools
	}
	return vars, nil
}
