package lora

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
)

// Scopes of the adapter's variables, apart from the base model's (/model, /lm_head), so that
// whatever reads the base weights never sees them: LoRAScope+<layer scope>/lora_A:weight [r,in]
// and /lora_B:weight [out,r] (float32), and SavedScope+<scope>:<name>, the trained copies of
// modules_to_save in the compute dtype.
const (
	LoRAScope  = "/peft/lora"
	SavedScope = "/peft/modules_to_save"
)

// Adapter is a LoRA adapter on a model's context: a decoder.Adapter.
type Adapter struct {
	Config Config
	// NoDropout turns the dropout off in training graphs too: TRL's disable_dropout (DPO's and
	// KTO's default), which sets every nn.Dropout of the model, LoRA's included, to p = 0.
	NoDropout bool
	mods      []module
	byScope   map[string]*module
	saved     []string // HF names of the modules_to_save tensors
	savedSet  map[string]bool
}

// New resolves c against the model's configuration (target modules, modules_to_save).
func New(cfg *decoder.Config, c Config) (*Adapter, error) {
	mods, saved, err := plan(cfg, c)
	if err != nil {
		return nil, err
	}
	if c.TargetRegex == "" && (len(c.TargetModules) == 0 || (len(c.TargetModules) == 1 && c.TargetModules[0] == AllLinear)) {
		// PEFT saves the resolved names: all-linear's and the model_type default's.
		c.TargetModules = nil
		for _, m := range mods {
			n := m.path[strings.LastIndexByte(m.path, '.')+1:]
			if !contains(c.TargetModules, n) {
				c.TargetModules = append(c.TargetModules, n)
			}
		}
	}
	a := &Adapter{Config: c, mods: mods, byScope: map[string]*module{}, saved: saved, savedSet: map[string]bool{}}
	for i := range a.mods {
		a.byScope[a.mods[i].scope] = &a.mods[i]
	}
	for _, s := range saved {
		a.savedSet[s] = true
	}
	return a, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Attach creates the adapter's variables in ctx, which holds the base weights: A drawn
// Kaiming-uniform (a = √5: U(−1/√in, 1/√in)) from a generator seeded with seed, module by module
// in the checkpoint's order; B = 0; the modules_to_save copies equal to the base weights. Then it
// sets the adapter on ctx (decoder.SetAdapter).
func (a *Adapter) Attach(ctx *context.Context, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x4c6f5241)) // "LoRA"
	r := a.Config.R
	for _, m := range a.mods {
		bound := 1 / math.Sqrt(float64(m.in)) // gain √(2/(1+a²)) = √(1/3); bound = √3·gain/√fan_in
		w := make([]float32, r*m.in)
		for i := range w {
			w[i] = float32((2*rng.Float64() - 1) * bound)
		}
		ctx.InAbsPath(LoRAScope+m.scope+"/lora_A").Checked(false).VariableWithValue("weight", tensors.FromFlatDataAndDimensions(w, r, m.in))
		ctx.InAbsPath(LoRAScope+m.scope+"/lora_B").Checked(false).VariableWithValue("weight", tensors.FromShape(shapes.Make(dtypes.Float32, m.out, r)))
	}
	for _, name := range a.saved {
		scope, vn := decoder.VarScope(name)
		v := ctx.GetVariableByScopeAndName(scope, vn)
		if v == nil {
			return fmt.Errorf("lora: modules_to_save: no variable for %s", name)
		}
		val, err := v.Value()
		if err != nil {
			return err
		}
		c, err := val.LocalClone()
		if err != nil {
			return err
		}
		ctx.InAbsPath(SavedScope+scope).Checked(false).VariableWithValue(vn, c)
	}
	decoder.SetAdapter(ctx, a)
	return nil
}

// Vars returns the adapter's trainable variables of ctx and their names in PEFT's
// adapter_model.safetensors: per module lora_A then lora_B, then the modules_to_save copies.
func (a *Adapter) Vars(ctx *context.Context) ([]*context.Variable, []string, error) {
	var vars []*context.Variable
	var names []string
	add := func(scope, name, peft string) error {
		v := ctx.GetVariableByScopeAndName(scope, name)
		if v == nil {
			return fmt.Errorf("lora: no variable for %s", peft)
		}
		vars, names = append(vars, v), append(names, peft)
		return nil
	}
	for _, m := range a.mods {
		for _, ab := range []string{"lora_A", "lora_B"} {
			if err := add(LoRAScope+m.scope+"/"+ab, "weight", NamePrefix+m.path+"."+ab+".weight"); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, name := range a.saved {
		scope, vn := decoder.VarScope(name)
		if err := add(SavedScope+scope, vn, NamePrefix+name); err != nil {
			return nil, nil, err
		}
	}
	return vars, names, nil
}

// Modules returns the paths of the adapted linear layers (model.layers.0.self_attn.q_proj).
func (a *Adapter) Modules() []string {
	out := make([]string, len(a.mods))
	for i, m := range a.mods {
		out[i] = m.path
	}
	return out
}

// Saved returns the HF names of the modules_to_save tensors.
func (a *Adapter) Saved() []string { return append([]string(nil), a.saved...) }

// Linear implements decoder.Adapter: y + s·B·A·dropout(x) for an adapted layer, computed in float32
// and cast back to y's dtype (PEFT: x cast to lora_A's dtype, result.to(torch_result_dtype)).
func (a *Adapter) Linear(ctx *context.Context, x, y *Node) *Node {
	m := a.byScope[ctx.Scope()]
	if m == nil {
		return y
	}
	g, r := x.Graph(), a.Config.R
	A := ctx.InAbsPath(LoRAScope+m.scope+"/lora_A").VariableWithShape("weight", shapes.Make(dtypes.Float32, r, m.in)).ValueGraph(g)
	B := ctx.InAbsPath(LoRAScope+m.scope+"/lora_B").VariableWithShape("weight", shapes.Make(dtypes.Float32, m.out, r)).ValueGraph(g)
	xf := a.dropout(ctx, ConvertDType(x, dtypes.Float32))
	h := DotGeneral(xf, []int{xf.Rank() - 1}, nil, A, []int{1}, nil) // [...,r]
	d := DotGeneral(h, []int{h.Rank() - 1}, nil, B, []int{1}, nil)   // [...,out]
	return ConvertDType(Add(ConvertDType(y, dtypes.Float32), MulScalar(d, a.Config.Scaling())), y.DType())
}

// Weight implements decoder.Adapter: a modules_to_save tensor reads its trained copy.
func (a *Adapter) Weight(ctx *context.Context, g *Graph, name string) *Node {
	hf := decoder.HFName(ctx.Scope(), name)
	if !a.savedSet[hf] {
		return nil
	}
	v := ctx.GetVariableByScopeAndName(SavedScope+ctx.Scope(), name)
	if v == nil {
		panic(fmt.Sprintf("lora: no modules_to_save copy of %s", hf))
	}
	return v.ValueGraph(g)
}

// trainParam is the graph parameter of a training graph: its dropout stream.
const trainParam = "posttrain_lora_train"

// stream is a training graph's random state, threaded through the adapted layers in the order
// the graph builds them.
type stream struct{ state *Node }

// Train marks graph g (built on ctx) as a training graph: the adapters' dropout draws from
// rngState, a graph input of shape graph.RNGStateShape (the caller derives it from the seed and
// the position in training, so that a resumed run draws the same masks).
func Train(ctx *context.Context, g *Graph, rngState *Node) {
	ctx.InAbsPath("/").SetGraphParam(g, trainParam, &stream{state: rngState})
}

// Dropping reports whether training graphs apply dropout (lora_dropout > 0, not disabled).
func (a *Adapter) Dropping() bool { return a.Config.Dropout > 0 && !a.NoDropout }

// dropout is nn.Dropout(p) in a training graph: x·keep/(1−p), keep ~ Bernoulli(1−p); the
// identity elsewhere (evaluation, scoring, generation: model.eval()).
func (a *Adapter) dropout(ctx *context.Context, x *Node) *Node {
	if !a.Dropping() {
		return x
	}
	v, ok := ctx.GetGraphParam(x.Graph(), trainParam)
	if !ok {
		return x
	}
	s := v.(*stream)
	var u *Node
	s.state, u = RandomUniform(s.state, x.Shape())
	p := a.Config.Dropout
	keep := LessThan(u, Scalar(x.Graph(), x.DType(), 1-p))
	return Where(keep, MulScalar(x, 1/(1-p)), ZerosLike(x))
}
