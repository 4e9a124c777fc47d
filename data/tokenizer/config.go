package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// Config is what a model's tokenizer_config.json says beyond tokenizer.json: the chat template and
// the names of the special tokens. Token fields are "" where the file has null or nothing (Qwen's
// bos_token is null).
type Config struct {
	// ChatTemplate is the Jinja chat template: tokenizer_config.json's "chat_template" (the one
	// named "default" when it is a list), else the contents of chat_template.jinja.
	ChatTemplate string
	// ChatTemplates holds every named template when "chat_template" is a list ("default",
	// "tool_use", ...); nil otherwise.
	ChatTemplates map[string]string

	BOSToken, EOSToken, PadToken, UNKToken string
	AddBOSToken, AddEOSToken               bool // add_bos_token / add_eos_token
	// HasAddBOS and HasAddEOS say whether the file sets add_bos_token / add_eos_token at all.
	HasAddBOS, HasAddEOS    bool
	AdditionalSpecialTokens []string
	// AddedTokensDecoder is "added_tokens_decoder", keyed by id; Load checks it against
	// tokenizer.json's added_tokens.
	AddedTokensDecoder map[int]AddedToken
	// ModelMaxLength is "model_max_length"; 0 when absent or HF's "no limit" sentinel (1e30).
	ModelMaxLength int
	TokenizerClass string // "Qwen2Tokenizer", ...
	// CleanUpTokenizationSpaces is "clean_up_tokenization_spaces" (true for Llama 3, false for
	// Qwen and Gemma 3): transformers' decode then removes the space before punctuation and
	// contractions (DecodeText).
	CleanUpTokenizationSpaces bool
}

// LoadConfig reads tokenizer_config.json from dir (and chat_template.jinja when the config has
// no template). A missing tokenizer_config.json is an error wrapping fs.ErrNotExist.
func LoadConfig(dir string) (Config, error) {
	file := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(file)
	if err != nil {
		return Config{}, fmt.Errorf("load tokenizer config: %w", err)
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", file, err)
	}
	if cfg.ChatTemplate == "" {
		jinja := filepath.Join(dir, "chat_template.jinja")
		b, err := os.ReadFile(jinja)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return Config{}, fmt.Errorf("load chat template: %w", err)
		}
		cfg.ChatTemplate = string(b)
	}
	return cfg, nil
}

// ParseConfig parses the contents of a tokenizer_config.json.
func ParseConfig(data []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, err
	}
	var cfg Config
	var err error
	tokens := []struct {
		field string
		dst   *string
	}{{"bos_token", &cfg.BOSToken}, {"eos_token", &cfg.EOSToken}, {"pad_token", &cfg.PadToken}, {"unk_token", &cfg.UNKToken}}
	for _, f := range tokens {
		if *f.dst, err = tokenField(raw[f.field]); err != nil {
			return Config{}, fmt.Errorf("%s: %w", f.field, err)
		}
	}
	if err := parseChatTemplate(raw["chat_template"], &cfg); err != nil {
		return Config{}, fmt.Errorf("chat_template: %w", err)
	}
	opt := []struct {
		field string
		dst   any
	}{
		{"add_bos_token", &cfg.AddBOSToken}, {"add_eos_token", &cfg.AddEOSToken},
		{"tokenizer_class", &cfg.TokenizerClass}, {"clean_up_tokenization_spaces", &cfg.CleanUpTokenizationSpaces},
	}
	for _, f := range opt {
		if v, ok := raw[f.field]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, f.dst); err != nil {
				return Config{}, fmt.Errorf("%s: %w", f.field, err)
			}
		}
	}
	cfg.HasAddBOS = raw["add_bos_token"] != nil && string(raw["add_bos_token"]) != "null"
	cfg.HasAddEOS = raw["add_eos_token"] != nil && string(raw["add_eos_token"]) != "null"
	if v, ok := raw["additional_special_tokens"]; ok && string(v) != "null" {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return Config{}, fmt.Errorf("additional_special_tokens: %w", err)
		}
		for i, item := range list {
			s, err := tokenField(item)
			if err != nil {
				return Config{}, fmt.Errorf("additional_special_tokens[%d]: %w", i, err)
			}
			cfg.AdditionalSpecialTokens = append(cfg.AdditionalSpecialTokens, s)
		}
	}
	if v, ok := raw["model_max_length"]; ok && string(v) != "null" {
		var n float64
		if err := json.Unmarshal(v, &n); err != nil {
			return Config{}, fmt.Errorf("model_max_length: %w", err)
		}
		if n >= 1 && n < math.MaxInt32 {
			cfg.ModelMaxLength = int(n)
		}
	}
	if cfg.AddedTokensDecoder, err = parseAddedTokensDecoder(raw["added_tokens_decoder"]); err != nil {
		return Config{}, fmt.Errorf("added_tokens_decoder: %w", err)
	}
	return cfg, nil
}

// tokenField reads a special-token field: a string, null, or {"content": ..., ...}.
func tokenField(v json.RawMessage) (string, error) {
	if len(v) == 0 || string(v) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(v, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string, null or {\"content\": ...}, got %s", v)
	}
	return *obj.Content, nil
}

func parseChatTemplate(v json.RawMessage, cfg *Config) error {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	if json.Unmarshal(v, &cfg.ChatTemplate) == nil {
		return nil
	}
	var named []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(v, &named); err != nil {
		return fmt.Errorf("want a string or a list of {\"name\", \"template\"}: %w", err)
	}
	cfg.ChatTemplates = make(map[string]string)
	for _, n := range named {
		cfg.ChatTemplates[n.Name] = n.Template
	}
	cfg.ChatTemplate = cfg.ChatTemplates["default"]
	return nil
}

func parseAddedTokensDecoder(v json.RawMessage) (map[int]AddedToken, error) {
	if len(v) == 0 || string(v) == "null" {
		return nil, nil
	}
	var byKey map[string]AddedToken
	if err := json.Unmarshal(v, &byKey); err != nil {
		return nil, err
	}
	out := make(map[int]AddedToken, len(byKey))
	for k, a := range byKey {
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("key %q is not an id", k)
		}
		a.ID = id
		out[id] = a
	}
	return out, nil
}

// checkConfig verifies that every token the config names exists in the tokenizer and that
// added_tokens_decoder agrees with tokenizer.json: a mismatch would silently shift ids.
func (t *BPE) checkConfig(cfg Config) error {
	named := map[string]string{"bos_token": cfg.BOSToken, "eos_token": cfg.EOSToken, "pad_token": cfg.PadToken, "unk_token": cfg.UNKToken}
	fields := make([]string, 0, len(named))
	for f := range named {
		fields = append(fields, f)
	}
	sort.Strings(fields)
	for _, f := range fields {
		if tok := named[f]; tok != "" {
			if _, ok := t.TokenToID(tok); !ok {
				return fmt.Errorf("tokenizer_config.json: %s %q is not a token of tokenizer.json", f, tok)
			}
		}
	}
	ids := make([]int, 0, len(cfg.AddedTokensDecoder))
	for id := range cfg.AddedTokensDecoder {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		a := cfg.AddedTokensDecoder[id]
		got, ok := t.TokenToID(a.Content)
		if !ok || got != id {
			return fmt.Errorf("tokenizer_config.json: added_tokens_decoder[%d] %q has id %d in tokenizer.json (found: %v)", id, a.Content, got, ok)
		}
		if i, ok := t.addedByID[id]; ok && t.added[i].Special != a.Special {
			return fmt.Errorf("tokenizer_config.json: added_tokens_decoder[%d] %q: special=%v but tokenizer.json says %v", id, a.Content, a.Special, t.added[i].Special)
		}
	}
	return nil
}

// postProcessorClasses are the tokenizer classes whose transformers implementation rebuilds the
// post-processor from add_bos_token (default true) and add_eos_token (default false) when it
// loads (LlamaTokenizerFast.update_post_processor, which GemmaTokenizerFast inherits).
var postProcessorClasses = map[string]bool{
	"LlamaTokenizer": true, "LlamaTokenizerFast": true, "GemmaTokenizer": true, "GemmaTokenizerFast": true,
}

// applyConfigSpecials sets the special tokens EncodeSpecial adds as transformers does for cfg's
// tokenizer class: for Llama and Gemma classes, [bos_token] if add_bos_token, then the text, then
// [eos_token] if add_eos_token; for the others (Qwen2Tokenizer, PreTrainedTokenizerFast, whose
// Llama 3 files carry a TemplateProcessing) the file's post-processor as it is.
func (t *BPE) applyConfigSpecials(cfg Config) error {
	if !postProcessorClasses[cfg.TokenizerClass] {
		return nil
	}
	addBOS := cfg.AddBOSToken || !cfg.HasAddBOS
	addEOS := cfg.AddEOSToken && cfg.HasAddEOS
	var prefix, suffix []int
	for _, f := range []struct {
		on         bool
		field, tok string
		dst        *[]int
	}{{addBOS, "bos_token", cfg.BOSToken, &prefix}, {addEOS, "eos_token", cfg.EOSToken, &suffix}} {
		if !f.on {
			continue
		}
		id, ok := t.TokenToID(f.tok)
		if f.tok == "" || !ok {
			return fmt.Errorf("tokenizer_config.json: add_%s is true but %s is not set (%s)", f.field, f.field, cfg.TokenizerClass)
		}
		*f.dst = []int{id}
	}
	t.prefix, t.suffix = prefix, suffix
	return nil
}
