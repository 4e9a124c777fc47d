package grpo

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/tokenmask"
)

// The Qwen2 side of the GRPO step. A rollout batch is laid out as TRL lays it out
// (grpo_trainer.py L1379-1384): prompts left-padded to P, completions right-padded to C, so every
// completion starts at position P:
//
//	ids, pos, attn [B,P+C] int32   (attn 1 = real token)
//	mask           [B,C]   float32 (1 = completion token the loss counts)
//
// Only the C completion positions go through the LM head (TRL's logits_to_keep = C+1 minus the
// last logit): the hidden state at P-1+t predicts completion token t.

// MicroBatch are the inputs of a GRPO micro-batch's loss graph (lossGraph, MicroBatchLoss).
type MicroBatch[T any] struct {
	rollout.Sequences[T]
	Mask            T // [B,C] float32: 1 = completion token the loss counts
	Advantages      T // [B] float32
	OldLogProbs     T // [B,C] float32: π_old's (read only off-policy; on-policy the graph's own)
	RefLogProbs     T // [B,C] float32: the reference's (read only when beta ≠ 0)
	SampledLogProbs T // [B,C] float32: the sampler's (the sampling_logp_difference metrics)
}

// lossSpec is what the compiled GRPO step needs to know about the run; all of it is fixed for
// the run, so it is captured as Go values (one graph per batch shape).
type lossSpec struct {
	Model         *decoder.Config
	CompletionLen int
	Temperature   float64
	Params        Params
	Ratio         Ratio
	LossType      string // TRL loss_type: grpo, bnpo, dr_grpo, dapo; TRL 1.x's cispo, sapo, luspo, vespo
	GradAccum     int    // micro-batches per optimizer step
	// StepsPerGeneration is steps_per_generation: TRL 1.x's cispo and vespo scale the generation
	// batch's token count by GradAccum/StepsPerGeneration (stepNorm).
	StepsPerGeneration int
	// DAPOPerStep scales dapo's divisor as cispo's (dapo_normalizer per_step, TRL 1.x).
	DAPOPerStep bool
	// OffPolicy: the old log-probs input is π_old's (recomputed after generation); otherwise the
	// detached current log-probs are used, so ρ = 1 and only its gradient survives (TRL #2995).
	OffPolicy bool
	// EntropyMask applies TRL's top_entropy_quantile (HighEntropyMask with TopEntropyQuantile)
	// to each micro-batch; off when top_entropy_quantile is 1, leaving the graph as it was.
	EntropyMask        bool
	TopEntropyQuantile float64
	// Turns > 0 (a run with tools) logs the sampling gap of each of the model's turns too
	// (TurnMetric): turns 1 … Turns-1, and Turns and later together.
	Turns int
}

// TurnMetric is the name of the sampling gap's mean or max ("mean", "max") over the model's turn
// k of a multi-turn completion (the k-th run of its own tokens, between tool turns).
func TurnMetric(k int, stat string) string {
	return fmt.Sprintf("sampling/sampling_logp_difference/turn_%d/%s", k, stat)
}

// TurnMasks splits a [B,C] completion mask (1 = the model's token) into the masks of the model's
// turns 1 … n-1 and of turns n and later: a turn starts at a model token that follows a masked
// one (a tool turn) or the start.
func TurnMasks(mask *Node, n int) []*Node {
	starts := Mul(mask, OneMinus(ShiftRight(mask, 1, 0)))
	turn := generate.PrefixSum(starts) // turn[i,j]: the starts up to j
	out := make([]*Node, n)
	for k := 1; k <= n; k++ {
		in := Equal(turn, ConstAs(turn, float64(k)))
		if k == n {
			in = GreaterOrEqual(turn, ConstAs(turn, float64(k)))
		}
		out[k-1] = Mul(mask, ConvertDType(in, mask.DType()))
	}
	return out
}

// isMaxMetric reports whether a step takes the maximum of the metric over its micro-batches.
func isMaxMetric(name string) bool {
	return name == sampleDiffMax || strings.HasPrefix(name, "sampling/sampling_logp_difference/turn_") && strings.HasSuffix(name, "/max")
}

// MicroBatchLoss is the graph the trainer compiles for one GRPO micro-batch (lossGraph:
// rollout.CompletionLogProbs at the sampling temperature, then Loss with lossType's aggregation, TRL's
// loss_type) and the host-side normaliser of an optimizer step of rows completions holding tokens
// loss tokens (stepNorm), for a caller that drives loop.Optimizer itself (posttrain bench grpo).
// It is on-policy (π_old is the detached current policy: ρ = 1), with token-level ratios and no
// entropy mask. The loss takes the trainer's inputs, MicroBatch (old log-probs unused, reference
// unused when p.Beta is 0).
func MicroBatchLoss(model *decoder.Config, completionLen int, temperature float64, p Params, lossType string,
	gradAccum int) (loss loop.LossFunc, stepNorm func(rows, tokens int) float64) {
	sp := &lossSpec{Model: model, CompletionLen: completionLen, Temperature: temperature, Params: p, Ratio: TokenRatio,
		LossType: lossType, GradAccum: gradAccum}
	return sp.lossGraph, sp.stepNorm
}

// sampleDiffMax is the step metric that a step takes the maximum of over its micro-batches (the
// others are averaged).
const sampleDiffMax = rl.SamplingDiffMax

// lossGraph is the loop.LossFunc of a GRPO micro-batch: inputs MicroBatch; norm is the optimizer
// step's normaliser (see aggregate), so that the micro-batch losses of a step sum to the loss of
// the whole accumulated batch.
//
// The step metrics carry TRL's names. TRL logs, per micro-batch, the mean over processes of the
// low/high clip ratios and also their min (low_min) and max (high_max) over processes
// (grpo_trainer.py _compute_loss: nanmin/nanmax of the gathered values); posttrain runs one
// process, so low_min = low_mean and high_max = high_mean, averaged over micro-batches and the
// logging window like every other metric, as TRL's log() does.
func (sp *lossSpec) lossGraph(ctx *context.Context, nodes named.Inputs, norm *Node) (*Node, map[string]*Node) {
	in := named.Bind[MicroBatch[*Node]](nodes)
	mask, adv, old, ref, sampled := in.Mask, in.Advantages, in.OldLogProbs, in.RefLogProbs, in.SampledLogProbs
	// The completions' width is this micro-batch's (Scored.widths); sp.CompletionLen stays
	// max_completion_length, dr_grpo's constant divisor.
	logps, entropy := rollout.CompletionLogProbs(ctx, sp.Model, in.Sequences, mask.Shape().Dim(1), sp.Temperature)
	if !sp.OffPolicy {
		old = StopGradient(logps)
	}
	inputs := Inputs{LogProbs: logps, OldLogProbs: old, Mask: mask, Advantages: adv}
	if sp.EntropyMask {
		// TRL computes the threshold in _compute_loss, i.e. per micro-batch, from the entropies of
		// the very forward pass that is differentiated (current weights, all processes gathered;
		// posttrain has one) — so it is done here, in the graph, not from the scoring pass.
		inputs.EntropyMask = HighEntropyMask(entropy, mask, sp.TopEntropyQuantile)
	}
	if sp.Params.Beta != 0 {
		inputs.RefLogProbs = ref
	}
	loss, m := Loss(inputs, sp.Params, sp.Ratio, sp.aggregate(norm))
	// |sampling − training| log-prob per token, both before any update of this generation batch:
	// the current policy when on-policy, π_old (recomputed right after generation) otherwise.
	training := StopGradient(logps)
	if sp.OffPolicy {
		training = old
	}
	delta := Sub(training, sampled)
	diff := tokenmask.Masked(Abs(delta), mask)
	outside := ConvertDType(LogicalOr(LessThan(delta, ConstAs(delta, math.Log(rl.RatioBandLow))),
		GreaterThan(delta, ConstAs(delta, math.Log(rl.RatioBandHigh)))), delta.DType())
	f64 := func(x *Node) *Node { return ConvertDType(x, dtypes.Float64) }
	out := map[string]*Node{
		"kl":                m.KL,
		"entropy":           f64(tokenmask.TokenMean(entropy, mask)),
		rl.SamplingDiffMean: f64(tokenmask.TokenMean(diff, mask)),
		sampleDiffMax:       f64(ReduceAllMax(diff)),
		rl.SamplingOutside:  f64(tokenmask.TokenMean(outside, mask)),
	}
	if sp.Turns > 0 {
		for k, tk := range TurnMasks(mask, sp.Turns) {
			out[TurnMetric(k+1, "mean")] = f64(tokenmask.TokenMean(diff, tk))
			out[TurnMetric(k+1, "max")] = f64(ReduceAllMax(Mul(diff, tk)))
		}
	}
	switch sp.LossType { // TRL 1.16 logs the clip ratios of the clipped losses only
	case "cispo":
		out["cispo_clip_ratio"] = m.CISPOClip
	case "vespo":
		out["vespo/phi_seq_mean"] = m.VESPOPhiMean
	case "sapo":
	default:
		out["clip_ratio/low_mean"], out["clip_ratio/low_min"] = m.ClipRatioLow, m.ClipRatioLow // one process
		out["clip_ratio/high_mean"], out["clip_ratio/high_max"] = m.ClipRatioHigh, m.ClipRatioHigh
		out["clip_ratio/region_mean"] = m.ClipRatioRegion
	}
	return loss, out
}

// scoreInputs are the scoring graph's: the sequences [B,P+C] and the completions' mask [B,C],
// whose width C says where the completions start.
type scoreInputs[T any] struct {
	rollout.Sequences[T]
	Mask T
}

// scoreGraph is the forward-only graph of old and reference log-probs: inputs scoreInputs →
// "logps", the completion log-probs [B,C] at the sampling temperature.
func (sp *lossSpec) scoreGraph(ctx *context.Context, nodes named.Inputs) map[string]*Node {
	in := named.Bind[scoreInputs[*Node]](nodes)
	lp, _ := rollout.CompletionLogProbs(ctx, sp.Model, in.Sequences, in.Mask.Shape().Dim(1), sp.Temperature)
	return map[string]*Node{"logps": lp}
}

// baseScoreGraph is scoreGraph under the base model: the policy's adapter disabled (TRL's
// reference under PEFT, model.disable_adapter()).
func (sp *lossSpec) baseScoreGraph(ctx *context.Context, nodes named.Inputs) map[string]*Node {
	decoder.DisableAdapter(ctx, nodes.Values[0].Graph())
	return sp.scoreGraph(ctx, nodes)
}

// aggregate is TRL's loss_type for one micro-batch of an accumulated step (TRL divides grpo, bnpo
// and dr_grpo by the number of accumulation steps, and dapo by num_items_in_batch, the
// generation batch's completion tokens: Scored.completionTokens):
//
//	grpo     Σ_b mean_t ℓ_bt / norm            norm = sequences of the step (= GRPOMean / GA)
//	bnpo     BNPOMean / GA                     (token mean of each micro-batch)
//	dr_grpo  DrGRPOMean(L) / GA
//	dapo     DAPOMean(norm)                    norm = completion tokens of the generation batch
//	sapo     as grpo (TRL 1.x)
//	luspo    SequenceSumMean / GA (TRL 1.x)
//	cispo    DAPOMean(norm), vespo too (TRL 1.x)  norm = those tokens × GA / steps_per_generation
func (sp *lossSpec) aggregate(norm *Node) Aggregation {
	ga := float64(max(1, sp.GradAccum))
	switch sp.LossType {
	case "grpo", "sapo":
		return func(perToken, mask *Node) *Node {
			rows := float64(perToken.Shape().Dim(0))
			n := ConvertDType(StopGradient(norm), perToken.DType())
			return Div(MulScalar(GRPOMean(perToken, mask), rows), n)
		}
	case "bnpo":
		return func(perToken, mask *Node) *Node { return DivScalar(BNPOMean(perToken, mask), ga) }
	case "dr_grpo":
		return func(perToken, mask *Node) *Node {
			return DivScalar(DrGRPOMean(sp.CompletionLen)(perToken, mask), ga)
		}
	case "luspo": // TRL 1.x: (ℓ·mask).sum(-1).mean() / GA, each sequence weighted by its length
		return func(perToken, mask *Node) *Node { return DivScalar(SequenceSumMean(perToken, mask), ga) }
	}
	return DAPOMean(norm) // "dapo", TRL v0.24's default; TRL 1.x's cispo and vespo (stepNorm)
}

// stepNorm is the host-side normaliser of aggregate for a step of the given rows and completion
// tokens.
func (sp *lossSpec) stepNorm(rows, tokens int) float64 {
	switch sp.LossType {
	case "grpo", "sapo":
		return float64(rows)
	case "dapo":
		if sp.DAPOPerStep {
			return float64(max(tokens, 1)) * float64(max(1, sp.GradAccum)) / float64(max(1, sp.StepsPerGeneration))
		}
		return float64(max(tokens, 1))
	case "cispo", "vespo": // TRL 1.x: num_items_in_batch · GA / steps_per_generation
		return float64(max(tokens, 1)) * float64(max(1, sp.GradAccum)) / float64(max(1, sp.StepsPerGeneration))
	}
	return 1
}
