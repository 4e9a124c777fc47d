package loop

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/models/qwen2"
)

// Model is a Qwen2 checkpoint loaded for training: its weights as variables of Ctx at the HF
// scopes (qwen2.VarScope), in the compute dtype, plus its tokenizer and chat template.
//
// Under bf16 the variables at the HF scopes hold bfloat16 copies that the forward and backward
// passes read, and the float32 master weights live at MasterScope+scope; the optimizer updates
// the masters (and its float32 state) and rewrites the bfloat16 copies from them after each step.
type Model struct {
	Dir       string // the checkpoint directory the weights were read from
	Config    *qwen2.Config
	Ctx       *context.Context
	DType     dtypes.DType // compute dtype: Float32, or BFloat16 with float32 masters
	Tokenizer *tokenizer.BPE
	Template  *chat.Template // nil when the checkpoint has no chat template

	// eos replaces the tokenizer's eos_token when set (SFT's eos_token, a cloned chat template);
	// Save writes it into the output's tokenizer_config.json.
	eos string
	// template is set when the chat template was replaced (SFT's chat_template_path); Save writes
	// its source into the output's tokenizer_config.json.
	template string
	// eosID ≥ 0 sets config.json's and generation_config.json's eos_token_id on Save, as TRL's
	// clone_chat_template sets model.config and generation_config (-1: kept).
	eosID int
}

// MasterScope holds the float32 master weights under bf16.
const MasterScope = "/posttrain/master"

// LoadModel reads a checkpoint directory (config.json, safetensors weights, tokenizer.json,
// tokenizer_config.json) for training; bf16 selects bfloat16 compute with float32 masters.
func LoadModel(dir string, bf16 bool) (*Model, error) {
	ctx, cfg, err := qwen2.Load(dir, dtypes.Float32)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", dir, err)
	}
	if tok.VocabSize() > cfg.VocabSize {
		return nil, fmt.Errorf("model %s: the tokenizer has %d tokens but the model's vocab_size is %d", dir, tok.VocabSize(), cfg.VocabSize)
	}
	m := &Model{Dir: dir, Config: cfg, Ctx: ctx, DType: dtypes.Float32, Tokenizer: tok, eosID: -1}
	if m.Template, err = chat.Load(dir); err != nil && !errors.Is(err, fs.ErrNotExist) && !hasNoTemplate(dir) {
		return nil, fmt.Errorf("model %s: %w", dir, err)
	}
	if bf16 {
		if err := m.ToBF16(); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// hasNoTemplate reports whether dir's tokenizer_config.json carries no chat template at all (a
// base model), which is not an error until conversational data needs one.
func hasNoTemplate(dir string) bool {
	cfg, err := tokenizer.LoadConfig(dir)
	return err == nil && cfg.ChatTemplate == ""
}

// Params returns the model's weight variables (at the HF scopes) in HF order.
func (m *Model) Params() ([]*context.Variable, []string, error) {
	var vars []*context.Variable
	var names []string
	for _, s := range m.Config.Tensors() {
		scope, name := qwen2.VarScope(s.Name)
		v := m.Ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			return nil, nil, fmt.Errorf("model: no variable for %s", s.Name)
		}
		vars, names = append(vars, v), append(names, s.Name)
	}
	return vars, names, nil
}

// Master returns the float32 master variable of a weight (the weight itself in float32 mode).
func (m *Model) Master(v *context.Variable) *context.Variable {
	if m.DType == dtypes.Float32 {
		return v
	}
	return m.Ctx.GetVariableByScopeAndName(MasterScope+v.Scope(), v.Name())
}

// ToBF16 switches a float32 model to bf16 compute: every weight moves to its float32 master
// variable and a bfloat16 copy takes its place. A model already in bf16 is left as is.
func (m *Model) ToBF16() error {
	if m.DType == dtypes.BFloat16 {
		return nil
	}
	vars, _, err := m.Params()
	if err != nil {
		return err
	}
	for _, v := range vars {
		f32, err := v.Value()
		if err != nil {
			return err
		}
		m.Ctx.InAbsPath(MasterScope+v.Scope()).Checked(false).VariableWithValue(v.Name(), f32).SetTrainable(false)
		if err := v.SetValuePreservingOld(toBF16(f32)); err != nil {
			return err
		}
	}
	m.DType = dtypes.BFloat16
	return nil
}

func toBF16(t *tensors.Tensor) *tensors.Tensor {
	f, _ := qwen2.Float32s(t)
	bf := make([]bfloat16.BFloat16, len(f))
	for i, x := range f {
		bf[i] = bfloat16.FromFloat32(x)
	}
	return tensors.FromFlatDataAndDimensions(bf, t.Shape().Dimensions...)
}

// SetWeights overwrites the weights (masters under bf16, and their bfloat16 copies) with float32
// tensors keyed by HF name, e.g. read from a checkpoint's model.safetensors.
func (m *Model) SetWeights(byName map[string]*tensors.Tensor) error {
	vars, names, err := m.Params()
	if err != nil {
		return err
	}
	for i, v := range vars {
		t, ok := byName[names[i]]
		if !ok {
			return fmt.Errorf("model: weight %s is missing", names[i])
		}
		if !slices.Equal(t.Shape().Dimensions, v.Shape().Dimensions) {
			return fmt.Errorf("model: weight %s has shape %v, want %v", names[i], t.Shape().Dimensions, v.Shape().Dimensions)
		}
		if err := m.Master(v).SetValue(t); err != nil {
			return err
		}
		if m.DType == dtypes.BFloat16 {
			if err := v.SetValue(toBF16(t)); err != nil {
				return err
			}
		}
	}
	return nil
}

// masterContext returns a context holding the float32 weights at the HF scopes, for saving.
func (m *Model) masterContext() (*context.Context, error) {
	if m.DType == dtypes.Float32 {
		return m.Ctx, nil
	}
	vars, _, err := m.Params()
	if err != nil {
		return nil, err
	}
	out := context.New()
	for _, v := range vars {
		t, err := m.Master(v).Value()
		if err != nil {
			return nil, err
		}
		out.InAbsPath(v.Scope()).Checked(false).VariableWithValue(v.Name(), t)
	}
	return out, nil
}

// Save writes the model (float32 weights) as a HF checkpoint into dir, which must exist: weights,
// config.json and generation_config.json derived from the source checkpoint, tokenizer files.
func (m *Model) Save(dir string) error {
	ctx, err := m.masterContext()
	if err != nil {
		return err
	}
	opts := qwen2.SaveOptions{DType: "F32", TokenizerPath: m.Dir, BaseDir: m.Dir}
	if m.eosID >= 0 {
		gen, err := qwen2.ReadGenerationConfig(m.Dir)
		if err != nil {
			return err
		}
		if gen == nil {
			gen = &qwen2.GenerationConfig{BOSTokenID: m.Config.BOSTokenID}
		}
		g := *gen
		g.EOSTokenIDs = []int{m.eosID}
		opts.Generation = &g
	}
	if err := qwen2.WriteModel(dir, ctx, m.Config, opts); err != nil {
		return err
	}
	return m.saveTokenizerChanges(dir)
}

// EOS is the end-of-sequence token text: tokenizer_config.json's eos_token ("<|im_end|>" for Qwen
// instruct models) or its replacement (SetEOSToken), appended to standard (non-conversational)
// completions as TRL does.
func (m *Model) EOS() (string, int, error) {
	eos := m.Tokenizer.Config().EOSToken
	if m.eos != "" {
		eos = m.eos
	}
	if eos == "" {
		return "", 0, errors.New("the tokenizer has no eos_token (tokenizer_config.json)")
	}
	id, ok := m.Tokenizer.TokenToID(eos)
	if !ok {
		return "", 0, fmt.Errorf("eos_token %q is not a token", eos)
	}
	return eos, id, nil
}

// SetEOSToken replaces the tokenizer's eos_token with tok, as TRL v0.24's SFTTrainer does for
// SFTConfig.eos_token (tokenizer.eos_token_id = tokenizer.convert_tokens_to_ids(eos_token), an
// error when that is None). tok must be a token of the vocabulary (a vocabulary or added token);
// TRL's error is kept, naming the option. It is then what EOS returns, the chat template's
// eos_token variable, and what Save writes as tokenizer_config.json's eos_token (TRL saves the
// changed tokenizer); config.json and generation_config.json keep their ids, as in TRL.
func (m *Model) SetEOSToken(tok string) error {
	if _, ok := m.Tokenizer.TokenToID(tok); !ok {
		return fmt.Errorf("eos_token %q is not in the vocabulary of the tokenizer of %s (TRL: \"Ensure that the `eos_token` exists in the vocabulary before using it as an EOS token\")", tok, m.Dir)
	}
	m.eos = tok
	if m.Template != nil {
		m.Template.Special["eos_token"] = tok
	}
	return nil
}

// SetChatTemplate replaces the chat template with the one at path, as TRL v0.24's SFTTrainer does
// for SFTConfig.chat_template_path. A .jinja or .j2 file is the template itself and nothing else
// changes (TRL sets processing_class.chat_template). A tokenizer directory (tokenizer_config.json,
// or chat_template.jinja beside it) is TRL's clone_chat_template: its template, its added tokens
// and its eos_token, which becomes this tokenizer's eos_token and config.json's and
// generation_config.json's eos_token_id. TRL adds the source's tokens this vocabulary lacks and
// resizes the embeddings; posttrain does not, so they are an error naming them, as are the tokens
// written <|…|> in a template file (TRL leaves those to the user). Hub ids are not fetched.
func (m *Model) SetChatTemplate(path string) error {
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
		if _, ok := m.Tokenizer.TokenToID(tok); !ok && !slices.Contains(missing, tok) {
			missing = append(missing, tok)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("chat_template_path %s: the template needs %s, which the vocabulary of %s lacks (TRL would add them and resize the embeddings; posttrain does not)",
			path, strings.Join(missing, " "), m.Dir)
	}
	tpl, err := chat.LoadWithSource(m.Dir, src)
	if err != nil {
		return fmt.Errorf("chat_template_path %s: %w", path, err)
	}
	m.Template, m.template = tpl, src
	if eos != "" {
		id, _ := m.Tokenizer.TokenToID(eos)
		m.eos, m.eosID, m.Config.EOSTokenIDs = eos, id, []int{id}
	}
	if m.eos != "" {
		m.Template.Special["eos_token"] = m.eos
	}
	return nil
}

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

// Standard renders a conversational dataset with the model's chat template (TRL's
// maybe_apply_chat_template) and returns it with addEOS = false (the template closes every turn);
// a standard dataset is returned as is with addEOS = true.
func (m *Model) Standard(d *data.Dataset) (out *data.Dataset, addEOS bool, err error) {
	if !d.Conversational {
		return d, true, nil
	}
	if m.Template == nil {
		return nil, false, fmt.Errorf("%s: conversational data needs a chat template, and %s has none", d.Path, m.Dir)
	}
	out, err = data.ApplyChatTemplate(m.Template, d, chat.Options{})
	return out, false, err
}

// Specials are the special-token strings that must not appear doubled in a rendered example.
func (m *Model) Specials() []string {
	if m.Template != nil {
		return m.Template.SpecialStrings()
	}
	eos, _, _ := m.EOS()
	return []string{eos}
}
