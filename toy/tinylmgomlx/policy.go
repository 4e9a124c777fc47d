// Package tinylmgomlx trains the course's TinyLM (phases 8-12) through the GoMLX trainer path:
// the logit table is a trainable float64 variable, per-token log-probs are computed in the graph
// (gather the prefix rows, LogSoftmax), and every update is trainers/step applied to a loss from
// trainers/dpo, trainers/kto or trainers/grpo. Sampling stays on the host with the CPython RNG,
// through a toy/tinylm mirror of the table, so the sampled responses and the rows' creation order
// are the oracle's; the results are scored and printed by toy/tinylm.
package tinylmgomlx

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/toy/tinylm"
	"github.com/posttrain/posttrain/trainers/step"
)

// Policy is TinyLM's logit table as GoMLX variables, plus the host mirror used for sampling and
// scoring.
type Policy struct {
	backend backends.Backend
	ctx     *context.Context
	table   *context.Variable // /tinylm/logits [R,5], trainable: one row per tinylm.RowKeys key
	refTab  *context.Variable // /tinylm/ref_logits [R,5], frozen π_ref
	index   map[tinylm.Key]int
	keys    []tinylm.Key
	logps   *step.Eval // forward: policy and reference log-probs of a batch

	LM, Ref *tinylm.TinyLM // host mirrors: LM follows the table after every Sync; Ref stays at SFT
}

// NewPolicy returns the SFT policy (π = π_ref = SFT_PROBS, DEFAULT_PROBS elsewhere).
func NewPolicy(b backends.Backend) (*Policy, error) {
	keys := tinylm.RowKeys()
	init := make([]float64, 0, len(keys)*len(tinylm.Vocab))
	index := make(map[tinylm.Key]int, len(keys))
	for i, k := range keys {
		index[k] = i
		p, ok := tinylm.SFTProbs[k]
		if !ok {
			p = tinylm.DefaultProbs
		}
		for _, pi := range p {
			init = append(init, math.Log(pi))
		}
	}
	ctx := context.New()
	p := &Policy{backend: b, ctx: ctx, index: index, keys: keys, LM: tinylm.New(), Ref: tinylm.New()}
	dims := []int{len(keys), len(tinylm.Vocab)}
	p.table = ctx.In("tinylm").VariableWithValue("logits", tensors.FromFlatDataAndDimensions(init, dims...))
	p.refTab = ctx.In("tinylm").VariableWithValue("ref_logits", tensors.FromFlatDataAndDimensions(append([]float64(nil), init...), dims...)).
		SetTrainable(false)
	var err error
	p.logps, err = step.NewContextEval(b, ctx, func(ctx *context.Context, in []*Node) []*Node {
		g := in[0].Graph()
		return []*Node{TokenLogProbs(p.table.ValueGraph(g), in[0], in[1]), TokenLogProbs(p.refTab.ValueGraph(g), in[0], in[1])}
	})
	if err != nil {
		return nil, fmt.Errorf("tinylm policy: %w", err)
	}
	return p, nil
}

// newPolicy validates a trainer's cfg up front, then returns a fresh SFT policy (NewPolicy).
func newPolicy(b backends.Backend, cfg interface{ Validate() error }) (*Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return NewPolicy(b)
}

// TokenLogProbs is log π(y_t | x, y<t) computed in the graph (식 (8.2)): the logit row of each
// token's prefix (table [R,V], rows [B,T] int32) → LogSoftmax over the vocabulary → the entry of
// the token (tokens [B,T] int32). Output [B,T] in the table's dtype; padding positions hold the
// log-prob of row 0's token 0 and must be masked by the loss.
func TokenLogProbs(table, rows, tokens *Node) *Node {
	logits := Gather(table, InsertAxes(rows, -1)) // [B,T,V]
	lp := LogSoftmax(logits, -1)
	return ReduceSum(Mul(lp, OneHot(tokens, table.Shape().Dimensions[1], table.DType())), -1)
}

// Batch is a list of responses encoded for the graph, padded to tinylm.MaxNewTokens.
type Batch struct {
	Rows, Tokens [][]int32 // [B,T]: row index of each token's prefix, and the token
	Mask         [][]bool  // [B,T]: true on the response's tokens
	Prompts      []string
	Responses    [][]int
}

// Encode encodes responses (of prompts[i]) for the graph.
func (p *Policy) Encode(prompts []string, responses [][]int) Batch {
	b := Batch{Prompts: prompts, Responses: responses}
	for i, y := range responses {
		rows := make([]int32, tinylm.MaxNewTokens)
		toks := make([]int32, tinylm.MaxNewTokens)
		mask := make([]bool, tinylm.MaxNewTokens)
		for t, tok := range y {
			rows[t] = int32(p.index[tinylm.Key{Prompt: prompts[i], Prefix: tinylm.Show(y[:t])}])
			toks[t], mask[t] = int32(tok), true
		}
		b.Rows, b.Tokens, b.Mask = append(b.Rows, rows), append(b.Tokens, toks), append(b.Mask, mask)
	}
	return b
}

// LogProbs returns the per-token log-probs of batch under the policy and under π_ref, computed in
// the graph, each trimmed to the responses' lengths.
func (p *Policy) LogProbs(b Batch) (policy, ref [][]float64, err error) {
	outs, err := p.logps.Run(b.Rows, b.Tokens)
	if err != nil {
		return nil, nil, fmt.Errorf("tinylm policy: log-probs: %w", err)
	}
	return p.trim(b, step.Float64s(outs[0])), p.trim(b, step.Float64s(outs[1])), nil
}

func (p *Policy) trim(b Batch, flat []float64) [][]float64 {
	out := make([][]float64, len(b.Responses))
	for i, y := range b.Responses {
		out[i] = flat[i*tinylm.MaxNewTokens : i*tinylm.MaxNewTokens+len(y)]
	}
	return out
}

// NewStep compiles a plain-gradient-step trainer (the course's θ ← θ − lr·∇L) for loss. The step's
// inputs (see Inputs) are rows, tokens and mask of each of nBatches batches (DPO: chosen and
// rejected), then extra tensors. loss receives, per batch, the policy's and the (detached)
// reference's per-token log-probs computed in the graph and the mask, then the extras.
func (p *Policy) NewStep(lr float64, nBatches int, loss func(logps, refLogps, masks, extra []*Node) (*Node, []*Node)) (*step.Step, error) {
	return step.New(p.backend, p.ctx, step.Config{Optimizer: step.Plain, LearningRate: lr},
		func(ctx *context.Context, in []*Node) (*Node, []*Node) {
			g := in[0].Graph()
			var lps, refs, masks []*Node
			for i := range nBatches {
				rows, toks := in[3*i], in[3*i+1]
				lps = append(lps, TokenLogProbs(p.table.ValueGraph(g), rows, toks))
				refs = append(refs, StopGradient(TokenLogProbs(p.refTab.ValueGraph(g), rows, toks)))
				masks = append(masks, in[3*i+2])
			}
			return loss(lps, refs, masks, in[3*nBatches:])
		})
}

// Inputs returns the step inputs of batches followed by extras.
func Inputs(batches []Batch, extras ...any) []any {
	var in []any
	for _, b := range batches {
		in = append(in, b.Rows, b.Tokens, b.Mask)
	}
	return append(in, extras...)
}

// Sync copies the table's trained rows into the host mirror LM (the rows it has, in its order):
// the mirror then samples and scores with exactly the GoMLX parameters.
func (p *Policy) Sync() error {
	t, err := p.table.Value()
	if err != nil {
		return fmt.Errorf("tinylm policy: read logits: %w", err)
	}
	if t.DType() != dtypes.Float64 {
		return fmt.Errorf("tinylm policy: logits are %s, want float64", t.DType())
	}
	flat := tensors.MustCopyFlatData[float64](t)
	v := len(tinylm.Vocab)
	rows := p.LM.Logits()
	for i := range rows {
		r := p.index[rows[i].Key]
		rows[i].Logits = flat[r*v : (r+1)*v]
	}
	p.LM.SetLogits(rows)
	return nil
}
