// Package tinylmgomlx trains the course's TinyLM (phases 8-12) through the GoMLX trainer path:
// the logit table is a trainable float64 variable, per-token log-probs are computed in the graph
// (gather the prefix rows, LogSoftmax), and every update is trainers/engine/step applied to a loss from
// trainers/dpo, trainers/kto or trainers/grpo; each trainer names its step's inputs in a struct
// of its own (Responses and its extra tensors, internal/named). Sampling stays on the host with
// the CPython RNG, through a toy/tinylm mirror of the table, so the sampled responses and the
// rows' creation order are the oracle's; the results are scored and printed by toy/tinylm.
package tinylmgomlx

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/toy/tinylm"
	"github.com/posttrain/posttrain/trainers/engine/step"
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
	logps   *step.ContextEval // forward: policy and reference log-probs of a batch

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
	p.logps, err = step.NewContextEval(b, ctx, func(ctx *context.Context, nodes named.Inputs) map[string]*Node {
		in := named.Bind[prefixes[*Node]](nodes)
		g := in.Rows.Graph()
		return map[string]*Node{"policy": TokenLogProbs(p.table.ValueGraph(g), in.Rows, in.Tokens),
			"ref": TokenLogProbs(p.refTab.ValueGraph(g), in.Rows, in.Tokens)}
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

// Responses are a Batch as a step's graph takes it: Rows, Tokens and Mask. A trainer's step
// inputs embed them (or hold several, DPO's Chosen and Rejected) beside its extra tensors.
type Responses[T any] struct{ Rows, Tokens, Mask T }

// Inputs returns the batch's Responses for a step's input struct.
func (b Batch) Inputs() Responses[any] {
	return Responses[any]{Rows: b.Rows, Tokens: b.Tokens, Mask: b.Mask}
}

// prefixes are the inputs of the log-prob pass (LogProbs): Rows and Tokens.
type prefixes[T any] struct{ Rows, Tokens T }

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
	outs, err := p.logps.Run(named.Of[any](prefixes[any]{Rows: b.Rows, Tokens: b.Tokens}))
	if err != nil {
		return nil, nil, fmt.Errorf("tinylm policy: log-probs: %w", err)
	}
	return p.trim(b, step.Float64s(outs["policy"])), p.trim(b, step.Float64s(outs["ref"])), nil
}

func (p *Policy) trim(b Batch, flat []float64) [][]float64 {
	out := make([][]float64, len(b.Responses))
	for i, y := range b.Responses {
		out[i] = flat[i*tinylm.MaxNewTokens : i*tinylm.MaxNewTokens+len(y)]
	}
	return out
}

// Scored are a batch's Responses scored in the graph: the policy's and the (detached) reference's
// per-token log-probs [B,T], and the mask.
type Scored struct{ LogProbs, RefLogProbs, Mask *Node }

// Scorer scores a step's Responses in its graph.
type Scorer func(Responses[*Node]) Scored

// NewStep compiles a plain-gradient-step trainer (the course's θ ← θ − lr·∇L) for loss. The step
// runs on the Feed of a trainer's input struct (Responses and extra tensors; see Batch.Inputs);
// loss binds the same struct from in and scores its Responses with score.
func (p *Policy) NewStep(lr float64, loss func(score Scorer, in named.Inputs) (*Node, map[string]*Node)) (*step.Step, error) {
	return step.New(p.backend, p.ctx, step.Config{Optimizer: step.Plain, LearningRate: lr},
		func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
			return loss(p.score, in)
		})
}

// score computes r's log-probs under the policy and the detached reference.
func (p *Policy) score(r Responses[*Node]) Scored {
	g := r.Rows.Graph()
	return Scored{LogProbs: TokenLogProbs(p.table.ValueGraph(g), r.Rows, r.Tokens),
		RefLogProbs: StopGradient(TokenLogProbs(p.refTab.ValueGraph(g), r.Rows, r.Tokens)), Mask: r.Mask}
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
