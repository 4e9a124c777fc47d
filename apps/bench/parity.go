package bench

import (
	"fmt"
	"math"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/sft"
)

// The parity workload runs the training loop's own update machinery (loop.Optimizer: gradient,
// global-norm clipping, PyTorch's AdamW with HF Trainer's weight-decay groups) for a few steps on
// one scoring batch and returns each step's loss and gradient norm; scripts/gpu/hf_reference.py
// parity does the same with torch.optim.AdamW on the same checkpoint and batch, and the report
// compares them (CompareParity).

// ParityHP are the hyper-parameters both sides use.
var ParityHP = loop.OptimizerConfig{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, WeightDecay: 0.01, MaxGradNorm: 1}

// ParityResult is the parity workload's output (and the PyTorch side's).
type ParityResult struct {
	Info
	Steps        int       `json:"steps"`
	LR           float64   `json:"lr"`
	WeightDecay  float64   `json:"weight_decay"`
	MaxGradNorm  float64   `json:"max_grad_norm"`
	ScoredTokens int       `json:"scored_tokens"`
	Losses       []float64 `json:"losses"`     // before each step's update
	GradNorms    []float64 `json:"grad_norms"` // before clipping
}

// Parity runs steps AdamW steps at the constant learning rate lr on batch, the loss being the mean
// NLL of its scored tokens (decoder.ScoredMask: `posttrain score`'s rule). env must be loaded for
// training.
func Parity(env *Env, batch *decoder.Batch, steps int, lr float64) (*ParityResult, error) {
	if env.Model == nil {
		return nil, fmt.Errorf("parity: the model is not loaded for training")
	}
	cfg := env.Config
	nll := func(ctx *mlctx.Context, in named.Inputs, norm *Node) (*Node, map[string]*Node) {
		r := named.Bind[trainable.RowInputs[*Node]](in)
		return sft.NLLOverTokens(decoder.TokenLogProbs(ctx, cfg, r.IDs, r.Pos, r.Mask), r.Loss, norm), nil
	}
	opt, err := loop.NewOptimizer(env.Backend, env.Model, ParityHP, nll)
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	scored := decoder.ScoredMask(batch.Mask, batch.CompletionStart)
	n := 0
	for _, row := range scored {
		for _, s := range row {
			n += int(s)
		}
	}
	inputs := trainable.Rows{IDs: batch.IDs, Pos: decoder.PositionIDs(batch.Mask), Mask: batch.Mask, Loss: scored}.Inputs()
	res := &ParityResult{Info: env.Info, Steps: steps, LR: lr, WeightDecay: ParityHP.WeightDecay,
		MaxGradNorm: ParityHP.MaxGradNorm, ScoredTokens: n}
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

// ParityCheck compares the parity stages of posttrain and PyTorch step by step.
type ParityCheck struct {
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

// CompareParity compares two parity outputs (losses and grad_norms per step) by relative
// difference, |a − b| / |b|.
func CompareParity(goOut, refOut *ParityResult, tol float64) *ParityCheck {
	c := &ParityCheck{LossesGo: goOut.Losses, LossesRef: refOut.Losses, GradNormsGo: goOut.GradNorms,
		GradNormsRef: refOut.GradNorms, Tolerance: tol}
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
