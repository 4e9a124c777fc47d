package loop_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/kto"
	"github.com/posttrain/posttrain/trainers/sft"
)

// loraRun is an SFT loss on the qwen2-tiny fixture's left_pad batch through a loop.Optimizer.
type loraRun struct {
	m    *trainable.Model
	opt  *loop.Optimizer
	rows trainable.Rows
	n    float64 // scored tokens
}

func newLoRARun(t *testing.T, m *trainable.Model, b backends.Backend) *loraRun {
	t.Helper()
	cfg := sft.DefaultConfig()
	tr, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 1, 1)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if b == nil {
		b = looptest.Backend(t)
	}
	opt, err := loop.NewOptimizer(b, m, loop.OptimizerConfig{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}, tr.Loss)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(opt.Close)
	batch, _, err := decoder.ReadBatchJSON(filepath.Join(referenceFixture, "inputs", "left_pad.json"))
	if err != nil {
		t.Fatal(err)
	}
	r := &loraRun{m: m, opt: opt, rows: trainable.Rows{IDs: batch.IDs, Mask: batch.Mask, Pos: decoder.PositionIDs(batch.Mask),
		Loss: decoder.ScoredMask(batch.Mask, batch.CompletionStart)}}
	for _, row := range r.rows.Loss {
		for _, s := range row {
			r.n += float64(s)
		}
	}
	return r
}

// loss is the batch's loss under the current weights (the gradients are discarded).
func (r *loraRun) loss(t *testing.T) float64 {
	t.Helper()
	l, _, err := r.opt.Micro(r.rows.Inputs(), r.n)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.opt.Discard(); err != nil {
		t.Fatal(err)
	}
	return l
}

func peftModel(t *testing.T, c lora.Config, bf16 bool) *trainable.Model {
	t.Helper()
	m, err := trainable.LoadModelPEFT(referenceModel(t), bf16, c, 7)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func values(t *testing.T, v *context.Variable) []float32 {
	t.Helper()
	f, err := decoder.Float32s(v.MustValue())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// setRandom fills a float32 variable with U(−scale, scale) draws.
func setRandom(t *testing.T, v *context.Variable, rng *rand.Rand, scale float64) {
	t.Helper()
	f := make([]float32, v.Shape().Size())
	for i := range f {
		f[i] = float32((2*rng.Float64() - 1) * scale)
	}
	if err := v.SetValue(tensors.FromFlatDataAndDimensions(f, v.Shape().Dimensions...)); err != nil {
		t.Fatal(err)
	}
}

// PEFT's init: A ~ U(−1/√in, 1/√in) (kaiming_uniform_ with a = √5), B = 0; so at step 0 the
// adapted model's logits equal the base model's bit for bit, in float32 and in bf16; with B ≠ 0
// they differ, and the reference graph (adapter disabled) gives the base again.
func TestLoRA_StartsAtBase(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		base := looptest.Load(t, referenceModel(t), bf16)
		m := peftModel(t, lora.Config{R: 4, Alpha: 8, TargetModules: []string{lora.AllLinear}}, bf16)
		b := looptest.Backend(t)
		rows := trainable.PadRows([][]int32{{1, 5, 9, 13, 2}, {3, 4}}, []int{1, 1}, 8)
		want, _ := looptest.FullLogits(t, b, base, rows.Inputs())
		got, _ := looptest.FullLogits(t, b, m, rows.Inputs())
		if !slices.Equal(got, want) {
			t.Fatalf("bf16 %v: the adapted model's logits at step 0 differ from the base model's", bf16)
		}
		vars, names, err := m.Trainable()
		if err != nil {
			t.Fatal(err)
		}
		if len(vars) != 2*7*m.Config.NumHiddenLayers {
			t.Fatalf("%d adapter tensors, want lora_A and lora_B of 7 linear layers × %d layers", len(vars), m.Config.NumHiddenLayers)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i, v := range vars {
			f := values(t, v)
			if v.DType() != dtypes.Float32 {
				t.Fatalf("%s is %s, want float32", names[i], v.DType())
			}
			if strings.HasSuffix(names[i], "lora_B.weight") {
				if slices.ContainsFunc(f, func(x float32) bool { return x != 0 }) {
					t.Fatalf("%s is not zero at init", names[i])
				}
				setRandom(t, v, rng, 0.05)
				continue
			}
			bound := 1 / math.Sqrt(float64(v.Shape().Dimensions[1]))
			lo, hi := slices.Min(f), slices.Max(f)
			if float64(hi) > bound || float64(lo) < -bound || float64(hi) < 0.8*bound || float64(lo) > -0.8*bound {
				t.Fatalf("%s spans [%g, %g], want U(−%g, %g)", names[i], lo, hi, bound, bound)
			}
		}
		moved, _ := looptest.FullLogits(t, b, m, rows.Inputs())
		if slices.Equal(moved, want) {
			t.Fatalf("bf16 %v: B ≠ 0 does not change the logits", bf16)
		}
		ref, _, err := trainable.ReferenceLogProbs(b, m, encodedRows(), 2)
		if err != nil {
			t.Fatal(err)
		}
		baseRef, _, err := trainable.SequenceLogProbs(b, base, encodedRows(), 2)
		if err != nil {
			t.Fatal(err)
		}
		cur, _, err := trainable.SequenceLogProbs(b, m, encodedRows(), 2)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ref, baseRef) || slices.Equal(cur, baseRef) {
			t.Fatalf("bf16 %v: reference log-probs %v, base %v, adapted %v: want reference = base ≠ adapted", bf16, ref, baseRef, cur)
		}
	}
}

func encodedRows() []encode.Encoded {
	return []encode.Encoded{{IDs: []int32{1, 5, 9, 13, 2}, Start: 2}, {IDs: []int32{3, 4, 7}, Start: 1}}
}

// The gradients of A and B (accumulated by loop.Optimizer's graph, through the adapter's
// s·B·A·x in every linear layer) equal central finite differences of the loss, element by
// element, with rsLoRA's scaling and modules_to_save (model.norm) in the trainable set too.
func TestLoRA_GradientsMatchFiniteDifferences(t *testing.T) {
	m := peftModel(t, lora.Config{R: 2, Alpha: 5, TargetModules: []string{"q_proj", "down_proj"}, UseRSLoRA: true,
		ModulesToSave: []string{"model.norm"}}, false)
	r := newLoRARun(t, m, nil)
	vars, names, err := m.Trainable()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i, v := range vars {
		if strings.HasSuffix(names[i], "lora_B.weight") { // B ≠ 0, or A's gradient is zero
			setRandom(t, v, rng, 0.2)
		}
	}
	if _, _, err := r.opt.Micro(r.rows.Inputs(), r.n); err != nil {
		t.Fatal(err)
	}
	grads := make([][]float32, len(vars))
	for i, v := range vars {
		grads[i] = values(t, m.Ctx.GetVariableByScopeAndName(loop.GradScope+v.Scope(), v.Name()))
	}
	if err := r.opt.Discard(); err != nil {
		t.Fatal(err)
	}
	const h = 1e-2
	checked := 0
	for i, v := range vars {
		g := grads[i]
		k := rng.IntN(len(g)) // one random element of each tensor, and its largest-gradient element
		big := 0
		for j := range g {
			if math.Abs(float64(g[j])) > math.Abs(float64(g[big])) {
				big = j
			}
		}
		for _, j := range []int{k, big} {
			f := values(t, v)
			x := f[j]
			set := func(y float32) {
				f[j] = y
				if err := v.SetValue(tensors.FromFlatDataAndDimensions(slices.Clone(f), v.Shape().Dimensions...)); err != nil {
					t.Fatal(err)
				}
			}
			set(x + h)
			up := r.loss(t)
			set(x - h)
			down := r.loss(t)
			set(x)
			fd := (up - down) / (2 * h)
			if d := math.Abs(fd - float64(g[j])); d > 2e-3*math.Max(1, math.Abs(fd)) && d > 1e-4 {
				t.Errorf("%s[%d]: gradient %.6g, finite difference %.6g", names[i], j, g[j], fd)
			}
			checked++
		}
	}
	if checked != 2*len(vars) || !slices.Contains(names, lora.NamePrefix+"model.norm.weight") {
		t.Fatalf("checked %d elements of %v", checked, names)
	}
}

// Only the adapter (and the modules_to_save copies) are trained: the optimizer keeps gradient
// accumulators and AdamW moments for them alone, the base weights are bit for bit unchanged after
// updates and, under bf16, have no float32 masters; the adapter's B moves off zero and the loss
// falls.
func TestLoRA_OnlyAdapterTrains(t *testing.T) {
	for _, bf16 := range []bool{false, true} {
		m := peftModel(t, lora.Config{R: 4, Alpha: 16, TargetModules: []string{"q_proj", "v_proj"}}, bf16)
		base, _, err := m.Params()
		if err != nil {
			t.Fatal(err)
		}
		before := make([][]float32, len(base))
		for i, v := range base {
			before[i] = values(t, v)
		}
		r := newLoRARun(t, m, nil)
		var losses []float64
		for range 5 {
			l, _, err := r.opt.Micro(r.rows.Inputs(), r.n)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.opt.Apply(1e-2); err != nil {
				t.Fatal(err)
			}
			losses = append(losses, l)
		}
		if !(losses[4] < losses[0]) {
			t.Errorf("bf16 %v: losses %v do not fall", bf16, losses)
		}
		for i, v := range base {
			if !slices.Equal(values(t, v), before[i]) {
				t.Fatalf("bf16 %v: base weight %s changed", bf16, v.Scope())
			}
		}
		state := map[string]int{}
		for v := range m.Ctx.IterVariables() {
			for _, s := range []string{loop.GradScope, loop.ExpAvgScope, loop.ExpAvgSqScope, trainable.MasterScope} {
				if strings.HasPrefix(v.Scope(), s+"/") {
					state[s]++
					if !strings.HasPrefix(v.Scope(), s+lora.LoRAScope+"/") {
						t.Errorf("bf16 %v: optimizer or master state for %s/%s", bf16, v.Scope(), v.Name())
					}
				}
			}
		}
		n := 2 * 2 * m.Config.NumHiddenLayers
		if state[loop.GradScope] != n || state[loop.ExpAvgScope] != n || state[loop.ExpAvgSqScope] != n || state[trainable.MasterScope] != 0 {
			t.Errorf("bf16 %v: state variables %v, want %d per optimizer scope and no masters", bf16, state, n)
		}
		vars, names, _ := m.Trainable()
		for i, v := range vars {
			if strings.HasSuffix(names[i], "lora_B.weight") && !slices.ContainsFunc(values(t, v), func(x float32) bool { return x != 0 }) {
				t.Errorf("bf16 %v: %s is still zero after 5 updates", bf16, names[i])
			}
		}
	}
}

// LoRA's dropout acts in the training graph only, and draws the same masks for the same seed,
// step and micro-batch: the loss of a micro-batch repeats after Discard, differs from the loss
// without dropout, and scoring (no training graph) is unaffected.
func TestLoRA_DropoutOnlyInTraining(t *testing.T) {
	m := peftModel(t, lora.Config{R: 4, Alpha: 8, Dropout: 0.5, TargetModules: []string{lora.AllLinear}}, false)
	vars, names, _ := m.Trainable()
	rng := rand.New(rand.NewPCG(5, 6))
	for i, v := range vars {
		if strings.HasSuffix(names[i], "lora_B.weight") {
			setRandom(t, v, rng, 0.3)
		}
	}
	b := looptest.Backend(t)
	scored, _, err := trainable.SequenceLogProbs(b, m, encodedRows(), 2)
	if err != nil {
		t.Fatal(err)
	}
	r := newLoRARun(t, m, b)
	first, again := r.loss(t), r.loss(t)
	m.Adapter.NoDropout = true
	plain := newLoRARun(t, m, b).loss(t)
	if first != again || first == plain {
		t.Errorf("losses with dropout %v then %v, without %v: want the first two equal and the third different", first, again, plain)
	}
	rescored, _, err := trainable.SequenceLogProbs(b, m, encodedRows(), 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(scored, rescored) {
		t.Errorf("scoring depends on the dropout setting: %v vs %v", scored, rescored)
	}
}

// Without target modules the adapter takes PEFT's default for the model_type (q_proj, v_proj for
// qwen2) and records the resolved names, as PEFT writes them to adapter_config.json.
func TestLoRA_DefaultTargets(t *testing.T) {
	m := peftModel(t, lora.Config{R: 2, Alpha: 4, TargetModules: []string{}}, false)
	if got := m.Adapter.Config.TargetModules; !slices.Equal(got, []string{"q_proj", "v_proj"}) {
		t.Errorf("target modules %v, want [q_proj v_proj]", got)
	}
	if got := m.Adapter.Modules(); len(got) != 2*m.Config.NumHiddenLayers || got[1] != "model.layers.0.self_attn.v_proj" {
		t.Errorf("adapted layers %v", got)
	}
}

// --disable-dropout (TRL's disable_dropout) decides whether a LoRA run trains with lora_dropout:
// TRL's defaults (DPO and KTO without, GRPO and SFT with), and the option either way.
func TestLoadForTraining_DisableDropout(t *testing.T) {
	model := looptest.Model(t)
	dpoWith := dpo.DefaultConfig()
	dpoWith.DisableDropout = false
	grpoWithout := grpo.DefaultConfig()
	grpoWithout.DisableDropout = true
	for _, c := range []struct {
		cfg       config.Config
		noDropout bool
	}{
		{sft.DefaultConfig(), false}, {dpo.DefaultConfig(), true}, {kto.DefaultConfig(), true}, {grpo.DefaultConfig(), false},
		{dpoWith, false}, {grpoWithout, true},
	} {
		c.cfg.Common().Model = model
		config.PEFTOptions(c.cfg).UsePEFT = true
		m, err := trainable.LoadForTraining(model, c.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if m.Adapter == nil || m.Adapter.NoDropout != c.noDropout {
			t.Errorf("%s, disable_dropout %v: the adapter's NoDropout is %v, want %v", c.cfg.Method(), config.DisableDropout(c.cfg), m.Adapter.NoDropout, c.noDropout)
		}
	}
}
