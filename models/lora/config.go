// Package lora is PEFT's LoRA (Hu et al. 2021, arXiv:2106.09685) for the decoder of models/decoder,
// every family it loads: a frozen projection W x becomes
//
//	y = W·x + s·B·A·dropout(x),   A [r,in], B [out,r],   s = α/r (α/√r with rsLoRA)
//
// as peft/tuners/lora/layer.py's Linear.forward computes it (the adapter in float32, the input
// cast to it, the sum cast back to the layer's dtype). A starts Kaiming-uniform with a = √5
// (U(−1/√in, 1/√in), torch's nn.Linear default) and B at zero, so the adapted model starts equal
// to the base. The Adapter hooks in through decoder.Adapter (every linear layer and weight read);
// its files are PEFT's adapter_config.json and adapter_model.safetensors with PEFT's tensor names,
// and Merge folds it into the base weights.
package lora

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/models/decoder"
)

// PEFT's file names (peft/utils/constants.py) and the prefix of its saved tensor names
// (PeftModelForCausalLM.base_model.model).
const (
	ConfigName  = "adapter_config.json"
	WeightsName = "adapter_model.safetensors"
	AllLinear   = "all-linear" // INCLUDE_LINEAR_LAYERS_SHORTHAND
	NamePrefix  = "base_model.model."
)

// Config is PEFT's LoraConfig as TRL's get_peft_config builds it (task_type CAUSAL_LM, bias
// "none", no DoRA).
type Config struct {
	R       int     // rank r
	Alpha   float64 // lora_alpha α
	Dropout float64 // lora_dropout, on the adapter's input while training
	// TargetModules are matched as PEFT matches a list: a module whose path equals an entry or ends
	// with "." + entry gets an adapter; "all-linear" alone is every linear layer but the LM head;
	// empty is PEFT's default for the model_type (DefaultTargets).
	TargetModules []string
	// TargetRegex, when set (an adapter_config.json whose target_modules is a string), selects the
	// linear layers whose whole path matches it (PEFT: re.fullmatch), instead of TargetModules.
	TargetRegex   string
	UseRSLoRA     bool     // s = α/√r (Kalajdzievski 2023) instead of α/r
	ModulesToSave []string // modules trained in full (a trained copy; the original stays for π_ref)
	BaseModel     string   // base_model_name_or_path written to adapter_config.json
}

// Scaling is s of y = W·x + s·B·A·x: α/r, or α/√r with rsLoRA (LoraLayer.update_layer).
func (c Config) Scaling() float64 {
	if c.UseRSLoRA {
		return c.Alpha / math.Sqrt(float64(c.R))
	}
	return c.Alpha / float64(c.R)
}

// Validate checks the hyper-parameters.
func (c Config) Validate() error {
	switch {
	case c.R < 1:
		return fmt.Errorf("r must be ≥ 1, got %d", c.R)
	case math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0):
		return fmt.Errorf("lora_alpha must be finite, got %g", c.Alpha)
	case !(c.Dropout >= 0 && c.Dropout < 1):
		return fmt.Errorf("lora_dropout must be in [0, 1), got %g", c.Dropout)
	case slices.Contains(c.TargetModules, AllLinear) && len(c.TargetModules) > 1:
		return fmt.Errorf("target_modules: %s must be given alone, got %s", AllLinear, strings.Join(c.TargetModules, ","))
	}
	return nil
}

// DefaultTargets is PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING for the decoder
// families: a model_type without an entry (smollm3) needs target_modules given.
var DefaultTargets = map[string][]string{
	"llama": {"q_proj", "v_proj"}, "qwen2": {"q_proj", "v_proj"}, "qwen3": {"q_proj", "v_proj"},
	"mistral": {"q_proj", "v_proj"}, "gemma": {"q_proj", "v_proj"}, "gemma2": {"q_proj", "v_proj"},
	"gemma3_text": {"q_proj", "v_proj"},
}

// module is a targeted linear layer: its path (model.layers.0.self_attn.q_proj), its weight's
// variable scope and its shape.
type module struct {
	path, scope string
	out, in     int
}

// plan resolves c against a model's tensors: the linear layers that get an adapter (in the
// checkpoint's tensor order) and the tensors of modules_to_save (HF names).
func plan(cfg *decoder.Config, c Config) (mods []module, saved []string, err error) {
	if err := c.Validate(); err != nil {
		return nil, nil, err
	}
	specs := cfg.Tensors()
	paths := map[string]bool{} // every module holding a tensor, and its ancestors
	for _, s := range specs {
		p := s.Name[:strings.LastIndexByte(s.Name, '.')]
		for ; p != ""; p = parent(p) {
			paths[p] = true
		}
	}
	for _, m := range c.ModulesToSave {
		var hit []string
		for p := range paths {
			if strings.HasSuffix(p, m) { // PEFT's _set_trainable: key.endswith(target_key)
				hit = append(hit, p)
			}
		}
		if len(hit) == 0 {
			return nil, nil, fmt.Errorf("modules_to_save: module %q is not in the %s model", m, cfg.ModelType)
		}
		for _, s := range specs {
			for _, h := range hit {
				if strings.HasPrefix(s.Name, h+".") && !slices.Contains(saved, s.Name) {
					saved = append(saved, s.Name)
				}
			}
		}
	}
	if cfg.TieWordEmbeddings {
		for _, s := range saved {
			if s == "model.embed_tokens.weight" {
				return nil, nil, fmt.Errorf("modules_to_save: the %s model ties its LM head to embed_tokens (tie_word_embeddings); training a copy of the embeddings is not supported", cfg.ModelType)
			}
		}
	}
	targets := c.TargetModules
	if len(targets) == 0 && c.TargetRegex == "" {
		if targets = DefaultTargets[cfg.ModelType]; targets == nil {
			return nil, nil, fmt.Errorf("target_modules: PEFT has no default for model_type %q: name the modules (e.g. q_proj,v_proj, or all-linear)", cfg.ModelType)
		}
	}
	all := len(targets) == 1 && targets[0] == AllLinear
	var re *regexp.Regexp
	if c.TargetRegex != "" {
		if re, err = regexp.Compile(`^(?:` + c.TargetRegex + `)$`); err != nil {
			return nil, nil, fmt.Errorf("target_modules: %q: %w", c.TargetRegex, err)
		}
		targets = nil
	}
	found := map[string]bool{}
	saving := map[string]string{} // a target whose every layer modules_to_save took: the module that did
	for _, s := range specs {
		path, ok := strings.CutSuffix(s.Name, ".weight")
		if !ok || len(s.Shape) != 2 || path == "model.embed_tokens" || path == "lm_head" {
			continue // PEFT's all-linear leaves the output layer out; embeddings are not linear
		}
		for _, t := range targets {
			if m := savedBy(path, c.ModulesToSave); m != "" && (path == t || strings.HasSuffix(path, "."+t)) {
				saving[t] = m
			}
		}
		if excluded(path, c.ModulesToSave) {
			continue
		}
		match := all || (re != nil && re.MatchString(path))
		for _, t := range targets {
			if path == t || strings.HasSuffix(path, "."+t) {
				match, found[t] = true, true
			}
		}
		if match {
			scope, _ := decoder.VarScope(s.Name)
			mods = append(mods, module{path: path, scope: scope, out: s.Shape[0], in: s.Shape[1]})
		}
	}
	for _, t := range targets {
		if all || found[t] {
			continue
		}
		if m := saving[t]; m != "" {
			// PEFT gives no adapter to a module under modules_to_save: naming a target there
			// leaves it with none (the error used to blame target_modules).
			return nil, nil, fmt.Errorf("modules_to_save: %q takes every %s layer, which target_modules (%s) adapts: a module trained in full gets no adapter; name it in one of the two", m, t, strings.Join(targets, ","))
		}
		if t == "lm_head" || t == "embed_tokens" || strings.HasSuffix(t, ".lm_head") || strings.HasSuffix(t, ".embed_tokens") {
			return nil, nil, fmt.Errorf("target_modules: %s: LoRA on the LM head or the embeddings is not supported (train it with modules_to_save)", t)
		}
		return nil, nil, fmt.Errorf("target_modules: %q is not a linear layer of the %s model (its linear layers: %s)", t, cfg.ModelType, strings.Join(LinearNames(cfg), ", "))
	}
	if len(mods) == 0 && len(saved) == 0 {
		return nil, nil, fmt.Errorf("target_modules: no module of the %s model is targeted", cfg.ModelType)
	}
	return mods, saved, nil
}

// excluded is PEFT's rule that a module under modules_to_save gets no adapter:
// re.match(rf"(^|.*\.){m}($|\..*)", key).
func excluded(path string, save []string) bool { return savedBy(path, save) != "" }

// savedBy is the entry of save that excludes path (excluded), or "".
func savedBy(path string, save []string) string {
	for _, m := range save {
		if regexp.MustCompile(`^(.*\.)?` + regexp.QuoteMeta(m) + `(\..*)?$`).MatchString(path) {
			return m
		}
	}
	return ""
}

func parent(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// LinearNames are the last path components of the model's linear layers (what all-linear
// targets), in first-seen order: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj.
func LinearNames(cfg *decoder.Config) []string {
	var out []string
	for _, s := range cfg.Tensors() {
		path, ok := strings.CutSuffix(s.Name, ".weight")
		if !ok || len(s.Shape) != 2 || path == "model.embed_tokens" || path == "lm_head" {
			continue
		}
		if n := path[strings.LastIndexByte(path, '.')+1:]; !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}
