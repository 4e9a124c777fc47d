package main

import (
	"context"
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/loop"
	"github.com/posttrain/posttrain/trainers/sft"
)

// ---- bench parity ----

// bench parity runs the training loop's own update machinery (loop.Optimizer: gradient, global-norm
// clipping, PyTorch's AdamW with HF Trainer's weight-decay groups) for a few steps on one scoring
// batch and prints each step's loss and gradient norm; scripts/gpu/hf_reference.py parity does the
// same with torch.optim.AdamW on the same checkpoint and batch, and the GPU check compares them.

// benchParityHP are the hyper-parameters both sides use.
var benchParityHP = loop.AdamW{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}

func benchParityCommand() *cli.Command {
	return &cli.Command{
		Name: "parity",
		Usage: "AdamW steps of the training loop on one --input batch (mean NLL of its scored tokens): " +
			"loss and gradient norm per step, to compare with PyTorch",
		Flags: append(benchModelFlags("float32"),
			&cli.StringFlag{Name: "input", Required: true, Usage: "batch JSON file {input_ids, attention_mask, completion_start}"},
			&cli.IntFlag{Name: "steps", Value: 5, Usage: "optimizer steps (≥ 1)"},
			&cli.Float64Flag{Name: "lr", Value: 1e-4, Usage: "AdamW learning rate (constant)"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			steps, lr := cmd.Int("steps"), cmd.Float64("lr")
			if steps < 1 || !(lr > 0) {
				return usageError{fmt.Errorf("%s: need --steps ≥ 1 and --lr > 0", cmd.FullName())}
			}
			batch, _, err := qwen2.ReadBatchJSON(cmd.String("input"))
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			env, err := loadBenchModel(ctx, cmd, "parity")
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			defer env.backend.Finalize()
			if err := batch.Validate(env.cfg.VocabSize); err != nil {
				return fmt.Errorf("%s: %s: %w", cmd.FullName(), cmd.String("input"), err)
			}
			res, err := benchParity(env, batch, steps, lr)
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return writeBenchJSON(cmd.Root().Writer, res)
		},
	}
}

type benchParityResult struct {
	benchInfo
	Steps        int       `json:"steps"`
	LR           float64   `json:"lr"`
	WeightDecay  float64   `json:"weight_decay"`
	MaxGradNorm  float64   `json:"max_grad_norm"`
	ScoredTokens int       `json:"scored_tokens"`
	Losses       []float64 `json:"losses"`     // before each step's update
	GradNorms    []float64 `json:"grad_norms"` // before clipping
}

func benchParity(env *benchEnv, batch *qwen2.Batch, steps int, lr float64) (*benchParityResult, error) {
	cfg := env.cfg
	m := &loop.Model{Dir: env.dir, Config: cfg, Ctx: env.ctx, DType: dtypes.Float32}
	if env.dtype == dtypes.BFloat16 { // qwen2.Load gave bfloat16 weights: keep float32 masters as the trainers do
		mctx, _, err := qwen2.Load(env.dir, dtypes.Float32)
		if err != nil {
			return nil, err
		}
		m.Ctx = mctx
		if err := m.ToBF16(); err != nil {
			return nil, err
		}
	}
	opt, err := loop.NewOptimizer(env.backend, m, benchParityHP, func(ctx *mlctx.Context, in []*Node, norm *Node) (*Node, []*Node) {
		return sft.NLLOverTokens(qwen2.TokenLogProbs(ctx, cfg, in[0], in[1], in[2]), in[3], norm), nil
	})
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	scored := qwen2.ScoredMask(batch.Mask, batch.CompletionStart)
	n := 0
	for _, row := range scored {
		for _, s := range row {
			n += int(s)
		}
	}
	inputs := []any{tensors.FromValue(batch.IDs), tensors.FromValue(qwen2.PositionIDs(batch.Mask)), tensors.FromValue(batch.Mask),
		tensors.FromValue(scored)}
	res := &benchParityResult{benchInfo: env.info, Steps: steps, LR: lr, WeightDecay: benchParityHP.WeightDecay,
		MaxGradNorm: benchParityHP.MaxGradNorm, ScoredTokens: n}
	for i := range steps {
		loss, _, err := opt.Micro(inputs, float64(n))
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		norm, err := opt.Apply(lr)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		if math.IsNaN(loss) || math.IsNaN(norm) {
			return nil, fmt.Errorf("step %d: loss %v, gradient norm %v", i+1, loss, norm)
		}
		res.Losses, res.GradNorms = append(res.Losses, loss), append(res.GradNorms, norm)
	}
	return res, nil
}

// benchParityCheck compares the parity stages of posttrain and PyTorch step by step.
type benchParityCheck struct {
	Steps          int       `json:"steps"`
	LossesGo       []float64 `json:"losses_posttrain"`
	LossesRef      []float64 `json:"losses_pytorch"`
	GradNormsGo    []float64 `json:"grad_norms_posttrain"`
	GradNormsRef   []float64 `json:"grad_norms_pytorch"`
	MaxRelLoss     float64   `json:"max_rel_diff_loss"`
	MaxRelGradNorm float64   `json:"max_rel_diff_grad_norm"`
	Tolerance      float64   `json:"tolerance"`
	Pass           bool      `json:"pass"`
	Error          string    `json:"error,omitempty"`
}

// benchCompareParity compares two parity outputs (losses and grad_norms per step) by relative
// difference, |a − b| / |b|.
func benchCompareParity(goOut, refOut any, tol float64) *benchParityCheck {
	g, h := benchAsMap(goOut), benchAsMap(refOut)
	floats := func(m map[string]any, key string) []float64 {
		var out []float64
		xs, _ := m[key].([]any)
		for _, x := range xs {
			f, _ := x.(float64)
			out = append(out, f)
		}
		return out
	}
	c := &benchParityCheck{LossesGo: floats(g, "losses"), LossesRef: floats(h, "losses"),
		GradNormsGo: floats(g, "grad_norms"), GradNormsRef: floats(h, "grad_norms"), Tolerance: tol}
	c.Steps = len(c.LossesRef)
	rel := func(a, b []float64) float64 {
		d := 0.0
		for i := range a {
			r := math.Abs(a[i]-b[i]) / math.Max(math.Abs(b[i]), 1e-12)
			if math.IsNaN(r) {
				r = math.Inf(1)
			}
			d = math.Max(d, r)
		}
		return d
	}
	switch {
	case c.Steps == 0 || len(c.LossesGo) != c.Steps || len(c.GradNormsGo) != c.Steps || len(c.GradNormsRef) != c.Steps:
		c.Error = fmt.Sprintf("step counts differ: posttrain %d losses, %d norms; pytorch %d losses, %d norms",
			len(c.LossesGo), len(c.GradNormsGo), c.Steps, len(c.GradNormsRef))
	default:
		c.MaxRelLoss, c.MaxRelGradNorm = rel(c.LossesGo, c.LossesRef), rel(c.GradNormsGo, c.GradNormsRef)
	}
	c.Pass = c.Error == "" && c.MaxRelLoss <= tol && c.MaxRelGradNorm <= tol
	return c
}
