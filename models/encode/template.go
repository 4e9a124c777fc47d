package encode

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tokenizer"
)

// SetEOSToken replaces the tokenizer's eos_token with tok, as TRL v0.24's SFTTrainer does for
// SFTConfig.eos_token (tokenizer.eos_token_id = tokenizer.convert_tokens_to_ids(eos_token), an
// error when that is None). tok must be a token of the vocabulary (a vocabulary or added token);
// TRL's error is kept, naming the option. It is then what EOS returns, the chat template's
// eos_token variable, and what SaveChanges writes as tokenizer_config.json's eos_token (TRL saves
// the changed tokenizer); config.json and generation_config.json keep their ids, as in TRL.
func (t *Text) SetEOSToken(tok string) error {
	if _, ok := t.Tokenizer.TokenToID(tok); !ok {
		return fmt.Errorf("eos_token %q is not in the vocabulary of the tokenizer of %s (TRL: \"Ensure that the `eos_token` exists in the vocabulary before using it as an EOS token\")", tok, t.Dir)
	}
	t.eos = tok
	if t.Template != nil {
		t.Template.Special["eos_token"] = tok
	}
	return nil
}

// SetChatTemplate replaces the chat template with the one at path, as TRL v0.24's SFTTrainer does
// for SFTConfig.chat_template_path. A .jinja or .j2 file is the template itself and nothing else
// changes (TRL sets processing_class.chat_template). A tokenizer directory (tokenizer_config.json,
// or chat_template.jinja beside it) is TRL's clone_chat_template: its template, its added tokens
// and its eos_token, which becomes this tokenizer's eos_token and config.json's and
// generation_config.json's eos_token_id (ConfigEOS). TRL adds the source's tokens this vocabulary
// lacks and resizes the embeddings; posttrain does not, so they are an error naming them, as are
// the tokens written <|…|> in a template file (TRL leaves those to the user). Hub ids are not
// fetched.
func (t *Text) SetChatTemplate(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("chat_template_path: %w (want a .jinja file or a tokenizer directory; Hub ids are not fetched)", err)
	}
	var src, eos string
	var need []string
	switch ext := filepath.Ext(path); {
	case !st.IsDir() && (ext == ".jinja" || ext == ".j2"):
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("chat_template_path: %w", err)
		}
		src, need = string(raw), templateTokens(string(raw))
	case st.IsDir():
		if src, eos, need, err = cloneSource(path); err != nil {
			return fmt.Errorf("chat_template_path %s: %w", path, err)
		}
	default:
		return fmt.Errorf("chat_template_path %s: want a .jinja or .j2 template file or a tokenizer directory", path)
	}
	var missing []string
	for _, tok := range need {
		if _, ok := t.Tokenizer.TokenToID(tok); !ok && !slices.Contains(missing, tok) {
			missing = append(missing, tok)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("chat_template_path %s: the template needs %s, which the vocabulary of %s lacks (TRL would add them and resize the embeddings; posttrain does not)",
			path, strings.Join(missing, " "), t.Dir)
	}
	tpl, err := chat.LoadWithSource(t.Dir, src)
	if err != nil {
		return fmt.Errorf("chat_template_path %s: %w", path, err)
	}
	t.Template, t.template = tpl, src
	if eos != "" {
		id, _ := t.Tokenizer.TokenToID(eos)
		t.eos, t.eosID = eos, id
	}
	if t.eos != "" {
		t.Template.Special["eos_token"] = t.eos
	}
	return nil
}

// ConfigEOS is the eos_token_id that config.json and generation_config.json must take when the
// model is saved: a cloned chat template's eos_token (SetChatTemplate with a tokenizer directory),
// as TRL's clone_chat_template sets model.config and generation_config. ok is false when they keep
// their own ids.
func (t *Text) ConfigEOS() (id int, ok bool) { return t.eosID, t.eosID >= 0 }

// cloneSource reads what clone_chat_template takes from a tokenizer directory: the chat template,
// the eos_token, and the tokens the target needs (added tokens, by id, and the eos_token).
func cloneSource(dir string) (src, eos string, need []string, err error) {
	tpl, err := chat.Load(dir)
	if err != nil {
		return "", "", nil, err
	}
	cfg, err := tokenizer.LoadConfig(dir)
	if err != nil {
		return "", "", nil, err
	}
	if cfg.EOSToken == "" {
		return "", "", nil, errors.New("its tokenizer_config.json has no eos_token, which clone_chat_template makes the tokenizer's")
	}
	ids := slices.Sorted(maps.Keys(cfg.AddedTokensDecoder))
	for _, id := range ids {
		need = append(need, cfg.AddedTokensDecoder[id].Content)
	}
	return tpl.Source, cfg.EOSToken, append(need, cfg.EOSToken), nil
}

// specialPattern matches the special tokens a template writes as <|…|> (ChatML, Llama 3, Phi).
var specialPattern = regexp.MustCompile(`<\|[^|<>\s'"]+\|>`)

// templateTokens lists the <|…|> tokens written in a template source, in order of appearance.
func templateTokens(src string) []string {
	var out []string
	for _, t := range specialPattern.FindAllString(src, -1) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// SaveChanges rewrites dir/tokenizer_config.json (and special_tokens_map.json), tokenizer files
// copied from Dir, with the replaced eos_token, pad_token and chat template, as transformers' save_pretrained
// writes a changed tokenizer: sorted keys, two-space indent, no ASCII escaping. A replaced template
// goes into chat_template, and a copied chat_template.jinja, which would take precedence, is
// removed. Nothing is rewritten when nothing changed. config.json and generation_config.json are
// the model's to write (ConfigEOS).
func (t *Text) SaveChanges(dir string) error {
	if t.eos == "" && t.template == "" && t.pad == "" {
		return nil
	}
	set := map[string]string{}
	if t.eos != "" {
		set["eos_token"] = t.eos
	}
	if t.pad != "" {
		set["pad_token"] = t.pad
	}
	if t.template != "" {
		set["chat_template"] = t.template
		if err := os.Remove(filepath.Join(dir, "chat_template.jinja")); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("save tokenizer: %w", err)
		}
	}
	if err := rewriteJSON(filepath.Join(dir, "tokenizer_config.json"), set, true); err != nil {
		return err
	}
	delete(set, "chat_template")
	return rewriteJSON(filepath.Join(dir, "special_tokens_map.json"), set, false)
}

// rewriteJSON sets keys of the JSON object in path to strings; a token key holding an AddedToken
// object gets its "content" replaced instead. A missing file is created only when create is set.
func rewriteJSON(path string, set map[string]string, create bool) error {
	obj := map[string]any{}
	raw, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !create:
		return nil
	case err == nil:
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&obj); err != nil {
			return fmt.Errorf("save tokenizer: %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("save tokenizer: %w", err)
	}
	for k, v := range set {
		if added, ok := obj[k].(map[string]any); ok && k != "chat_template" {
			added["content"] = v
			continue
		}
		obj[k] = v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(obj); err != nil {
		return fmt.Errorf("save tokenizer: %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("save tokenizer: %w", err)
	}
	return nil
}
