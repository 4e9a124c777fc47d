package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/kto"
	"github.com/posttrain/posttrain/trainers/ppo"
	"github.com/posttrain/posttrain/trainers/reward"
	"github.com/posttrain/posttrain/trainers/sft"
)

// PlanMethods are the methods PlanStep plans.
var PlanMethods = []string{"sft", "dpo", "kto", "reward", "grpo", "ppo"}

// splitRows lays out rows of prompt+completion tokens, each cut at l's prompt width.
func splitRows(rows [][]int32, l rollout.Layout) (rollout.Sequences[any], error) {
	prompts, completions := make([][]int32, len(rows)), make([][]int32, len(rows))
	for i, r := range rows {
		prompts[i], completions[i] = r[:l.PromptLen], r[l.PromptLen:]
	}
	return l.Sequences(prompts, completions)
}

// table is a [rows][cols] per-token input filled with fill.
func table(rows, cols int, fill float32) [][]float32 {
	out := make([][]float32, rows)
	for i := range out {
		out[i] = make([]float32, cols)
		for j := range out[i] {
			out[i][j] = fill
		}
	}
	return out
}

func orDefault(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

// MemoryParams say which training step PlanStep compiles.
type MemoryParams struct {
	Preset string // decoder.Preset's name
	Method string // PlanMethods
	// Batch is per_device_train_batch_size (pairs for dpo and reward), SeqLen the tokens of
	// each row (of each completion's row for dpo; kto's KL rows as long; a grpo row's prompt and
	// completion); 0 is the method's TRL default (max_length, or max_prompt_length +
	// max_completion_length).
	Batch, SeqLen int
	DType         dtypes.DType
	LoRA          *lora.Config // nil: every weight trained
	// GradientCheckpointing recomputes each layer's activations in the backward pass.
	GradientCheckpointing bool
}

// MemoryResult is what `posttrain bench memory` prints. StateBytes are the bytes every variable
// of the training context holds between steps (weights, float32 masters, gradient accumulators,
// AdamW moments, an adapter); an executable needs, beyond the state, its batch arguments, its
// outputs not written in place, its temporaries and its code; TotalBytes is StateBytes plus the
// largest such need over the step's executables (Accum: forward, backward and the gradient
// sums; Update: clipping and AdamW). ArgumentBytes … TempBytes are the step's largest of each.
type MemoryResult struct {
	Workload              string      `json:"workload"`
	Backend               string      `json:"backend"`
	Preset                string      `json:"preset"`
	Method                string      `json:"method"`
	DType                 string      `json:"dtype"`
	Batch                 int         `json:"batch"`
	SeqLen                int         `json:"seq_len"`
	Rows                  int         `json:"rows"` // rows of the forward pass (2·batch for dpo, kto and reward)
	Params                int         `json:"params"`
	TrainableParams       int         `json:"trainable_params"`
	PEFT                  *PEFTInfo   `json:"peft,omitempty"`
	GradientCheckpointing bool        `json:"gradient_checkpointing"`
	ArgumentBytes         int64       `json:"argument_bytes"`
	OutputBytes           int64       `json:"output_bytes"`
	TempBytes             int64       `json:"temp_bytes"`
	AliasBytes            int64       `json:"alias_bytes"`
	StateBytes            int64       `json:"state_bytes"`
	TotalBytes            int64       `json:"total_bytes"`
	Accum                 *MemoryPlan `json:"accum"`
	Update                *MemoryPlan `json:"update"`
}

// PlanStep compiles one optimizer step of p.Method on the preset's shape, its weights shapes
// without values (trainable.ShapeModel: nothing of the model's size is allocated), through the
// trainer's own Batch and Loss and loop.Optimizer (loop.Optimizer.Plan), on synthetic rows of
// the requested shape, with the method's TRL default configuration; b must report memory plans
// (XLA).
func PlanStep(b backends.Backend, p MemoryParams) (*MemoryResult, error) {
	cfg, err := decoder.Preset(p.Preset)
	if err != nil {
		return nil, err
	}
	if p.Batch < 1 || (p.SeqLen != 0 && p.SeqLen < 2) {
		return nil, fmt.Errorf("memory: need a batch ≥ 1 and a sequence length ≥ 2")
	}
	if p.Method == "reward" {
		one, pad := 1, 0
		cfg.NumLabels, cfg.PadTokenID = one, &pad
	}
	var value *decoder.Config
	if p.Method == "ppo" { // the value model: the policy's shape with a one-label head, as TRL's (from the reward model)
		v := *cfg
		one, pad := 1, 0
		v.NumLabels, v.PadTokenID = one, &pad
		value = &v
	}
	m, err := trainable.ShapeModel(cfg, p.DType, p.LoRA, value)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(1, 0x9a7))
	ids := func(rows, n int) [][]int32 { return randomIDs(rng, cfg, rows, n) }
	half := func(rows [][]int32) []encode.Encoded {
		out := make([]encode.Encoded, len(rows))
		for i, r := range rows {
			out[i] = encode.Encoded{IDs: r, Start: len(r) / 2}
		}
		return out
	}
	zeros := func(n int) []float32 { return make([]float32, n) }
	var method loop.Method
	var train *loop.OptimizerConfig
	var lossFn loop.LossFunc
	var in named.Feed
	rows := p.Batch
	seq := p.SeqLen
	switch p.Method {
	case "sft":
		c := sft.DefaultConfig()
		hp := loop.OptimizerFor(&c.Training)
		seq = orDefault(seq, c.MaxLength)
		train = &hp
		method, err = sft.FromTokens(m, ids(p.Batch, seq), c.LossType)
	case "dpo":
		c := dpo.DefaultConfig()
		hp := loop.OptimizerFor(&c.Training)
		seq = orDefault(seq, c.MaxLength)
		train, rows = &hp, 2*p.Batch
		method, err = dpo.FromEncoded(m, c, half(ids(p.Batch, seq)), half(ids(p.Batch, seq)), zeros(p.Batch), zeros(p.Batch))
	case "kto":
		c := kto.DefaultConfig()
		hp := loop.OptimizerFor(&c.Training)
		seq = orDefault(seq, c.MaxLength)
		train, rows = &hp, 2*p.Batch
		good := make([]bool, p.Batch)
		for i := range good {
			good[i] = i%2 == 0
		}
		method, err = kto.FromEncoded(m, c, half(ids(p.Batch, seq)), half(ids(p.Batch, seq)), good, zeros(p.Batch), zeros(p.Batch))
	case "reward":
		c := reward.DefaultConfig()
		hp := loop.OptimizerFor(&c.Training)
		seq = orDefault(seq, c.MaxLength)
		train, rows = &hp, 2*p.Batch
		method, err = reward.FromTokens(m, c, ids(p.Batch, seq), ids(p.Batch, seq), zeros(p.Batch))
	case "grpo":
		// One micro-batch of per_device_train_batch_size completions after their prompts, as the
		// trainer's: rows of max_prompt_length + max_completion_length tokens (--seq-len: their sum,
		// the completion keeping TRL's length unless the row is shorter), on-policy, its loss_type,
		// clipping and beta.
		c := grpo.DefaultConfig()
		c.Resolve()
		hp := loop.OptimizerFor(&c.Training)
		train = &hp
		seq = orDefault(seq, c.MaxPromptLength+c.MaxCompletionLength)
		comp := min(c.MaxCompletionLength, seq-1)
		lossFn, _ = grpo.MicroBatchLoss(cfg, comp, c.Temperature, grpo.Params{EpsLow: c.Epsilon, EpsHigh: c.EpsilonHigh, Delta: c.Delta, Beta: c.Beta},
			c.LossType, c.GradientAccumulationSteps)
		sq, err := splitRows(ids(p.Batch, seq), rollout.Layout{PromptLen: seq - comp, CompletionLen: comp})
		if err != nil {
			return nil, err
		}
		in = named.Of[any](grpo.MicroBatch[any]{Sequences: sq, Mask: table(p.Batch, comp, 1), Advantages: zeros(p.Batch),
			OldLogProbs: table(p.Batch, comp, 0), RefLogProbs: table(p.Batch, comp, 0), SampledLogProbs: table(p.Batch, comp, 0)})
	case "ppo":
		// One micro-batch of per_device_train_batch_size queries and their responses (TRL's
		// response_length), the policy and the value model trained together (its
		// PolicyAndValueWrapper); --seq-len is query plus response (default: 512-token queries).
		c := ppo.DefaultConfig()
		hp := loop.OptimizerFor(&c.Training)
		train = &hp
		seq = orDefault(seq, 512+c.ResponseLength)
		resp := min(c.ResponseLength, seq-1)
		lossFn = ppo.MicroBatchLoss(cfg, value, resp, c.Temperature, ppo.LossParams{Cliprange: c.Cliprange, CliprangeValue: c.CliprangeValue, VFCoef: c.VFCoef})
		sq, err := splitRows(ids(p.Batch, seq), rollout.Layout{PromptLen: seq - resp, CompletionLen: resp, ByID: true})
		if err != nil {
			return nil, err
		}
		zero, one := table(p.Batch, resp, 0), table(p.Batch, resp, 1)
		in = named.Of[any](ppo.MicroBatch[any]{Sequences: sq, OldLogProbs: zero, Advantages: zero, Values: zero, Returns: zero,
			PGMask: one, VFMask: one, Cols: one})
	default:
		return nil, fmt.Errorf("memory: --method %q is not planned; valid: %v", p.Method, PlanMethods)
	}
	if err != nil {
		return nil, err
	}
	if method != nil {
		lossFn = method.Loss
		all := make([]int, method.NumExamples())
		for i := range all {
			all[i] = i
		}
		if in, err = method.Batch(all); err != nil {
			return nil, err
		}
	}
	train.Devices, train.FSDP, train.TensorParallel = 1, false, false
	train.GradientCheckpointing = p.GradientCheckpointing
	opt, err := loop.NewOptimizer(b, m, *train, lossFn)
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	plan, err := opt.Plan(in)
	if err != nil {
		return nil, err
	}
	res := &MemoryResult{Workload: "memory", Backend: b.Name(), Preset: p.Preset, Method: p.Method, DType: strings.ToLower(p.DType.String()),
		Batch: p.Batch, SeqLen: seq, Rows: rows, Params: cfg.NumParameters(), PEFT: peftInfo(p.LoRA, m.Adapter),
		GradientCheckpointing: p.GradientCheckpointing, Accum: memoryPlan(plan.Accum), Update: memoryPlan(plan.Update)}
	vars, _, err := m.Trainable()
	if err != nil {
		return nil, err
	}
	for _, v := range vars {
		res.TrainableParams += v.Shape().Size()
	}
	for v := range m.Ctx.IterVariables() {
		res.StateBytes += int64(v.Shape().Memory())
	}
	var peak int64
	for _, e := range []struct {
		stats backends.CompiledMemoryStats
		vars  int64
	}{{plan.Accum, plan.AccumVarBytes}, {plan.Update, plan.UpdateVarBytes}} {
		s := e.stats
		peak = max(peak, s.Arguments-e.vars+s.Outputs-s.Aliases+s.Temporary+s.GeneratedCode)
		res.ArgumentBytes = max(res.ArgumentBytes, s.Arguments)
		res.OutputBytes = max(res.OutputBytes, s.Outputs)
		res.TempBytes = max(res.TempBytes, s.Temporary)
		res.AliasBytes = max(res.AliasBytes, s.Aliases)
	}
	res.TotalBytes = res.StateBytes + peak
	return res, nil
}
