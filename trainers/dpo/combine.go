package dpo

import (
	"fmt"
	"slices"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
)

// Pairs are a micro-batch's per-pair sequence log-probs [B] under the policy and the reference,
// and the chosen rows' NLL (a scalar; needed by loss_type sft only).
type Pairs struct {
	PolicyChosen, PolicyRejected, RefChosen, RefRejected *Node
	NLL                                                  *Node
}

// Params are the options the loss types read: β, label_smoothing ε, discopop_tau τ, and how
// dpo_loss builds its logits (Logits): reference_free, f_divergence_type and
// f_alpha_divergence_coef ("" is reverse_kl).
type Params struct {
	Beta, LabelSmoothing, DiscopopTau float64
	ReferenceFree                     bool
	FDivergence                       string
	FAlphaCoef                        float64
}

// lossFunc is one loss type: its per-pair losses [B] (sft: the scalar NLL, the same for every pair)
// and the pairs' metrics (always against the real reference, as TRL's rewards).
type lossFunc func(p Pairs, o Params) (*Node, Metrics)

// onLogits adapts a loss of TRL's dpo_loss logits z (Logits) to a lossFunc.
func onLogits(f func(z *Node, o Params) *Node) lossFunc {
	return func(p Pairs, o Params) (*Node, Metrics) { return f(Logits(p, o), o), p.metrics(o) }
}

// onRatios adapts a loss of the log-ratios c, r (0 reference with reference_free) to a lossFunc.
func onRatios(f func(c, r *Node, beta float64) *Node) lossFunc {
	return func(p Pairs, o Params) (*Node, Metrics) {
		refC, refR := lossRefs(p, o)
		c, r := logRatios(p.PolicyChosen, p.PolicyRejected, refC, refR)
		return f(c, r, o.Beta), p.metrics(o)
	}
}

// onPairs adapts a loss that reads the log-probs themselves to a lossFunc: TRL's sppo_hard,
// nca_pair, aot, aot_pair and discopop recompute their log-ratios from the reference log-probs,
// so reference_free and f_divergence_type do not reach them.
func onPairs(f func(pc, pr, rc, rr *Node, o Params) *Node) lossFunc {
	return func(p Pairs, o Params) (*Node, Metrics) {
		return f(p.PolicyChosen, p.PolicyRejected, p.RefChosen, p.RefRejected, o), p.metrics(o)
	}
}

func (p Pairs) metrics(o Params) Metrics {
	return metrics(p.PolicyChosen, p.PolicyRejected, p.RefChosen, p.RefRejected, o.Beta)
}

// LossTypes maps TRL's loss_type names to the per-pair losses of loss.go's named functions.
// bco_pair is left out: its running reward mean is trainer state (see docs/training.md).
var LossTypes = map[string]lossFunc{
	"sigmoid":  onLogits(func(z *Node, o Params) *Node { return sigmoidLosses(z, o.Beta, o.LabelSmoothing) }),
	"ipo":      onLogits(func(z *Node, o Params) *Node { return ipoLosses(z, o.Beta) }),
	"hinge":    onLogits(func(z *Node, o Params) *Node { return hingeLosses(z, o.Beta) }),
	"robust":   onLogits(func(z *Node, o Params) *Node { return robustLosses(z, o.Beta, o.LabelSmoothing) }),
	"exo_pair": onLogits(func(z *Node, o Params) *Node { return exoPairLosses(z, o.Beta, o.LabelSmoothing) }),
	"nca_pair": onPairs(func(pc, pr, rc, rr *Node, o Params) *Node { return ncaPairLosses(pc, pr, rc, rr, o.Beta) }),
	"sppo_hard": onPairs(func(pc, pr, rc, rr *Node, o Params) *Node {
		return sppoHardLosses(pc, pr, rc, rr, o.Beta)
	}),
	"aot": onPairs(func(pc, pr, rc, rr *Node, o Params) *Node {
		return aotLosses(pc, pr, rc, rr, o.Beta, o.LabelSmoothing)
	}),
	"aot_pair": onPairs(func(pc, pr, rc, rr *Node, o Params) *Node {
		return aotPairLosses(pc, pr, rc, rr, o.Beta, o.LabelSmoothing)
	}),
	"discopop": onPairs(func(pc, pr, rc, rr *Node, o Params) *Node {
		return discoPOPLosses(pc, pr, rc, rr, o.Beta, o.DiscopopTau)
	}),
	"apo_zero": onRatios(apoZeroLosses),
	"apo_down": onRatios(apoDownLosses),
	"sft": func(p Pairs, o Params) (*Node, Metrics) {
		return ConvertDType(p.NLL, p.PolicyChosen.DType()), p.metrics(o)
	},
}

// CheckLossTypes reports the first name that is not in LossTypes.
func CheckLossTypes(types []string) error {
	for _, t := range types {
		if _, ok := LossTypes[t]; !ok {
			names := make([]string, 0, len(LossTypes))
			for n := range LossTypes {
				names = append(names, n)
			}
			slices.Sort(names)
			return fmt.Errorf("dpo: loss_type %q is not implemented; valid: %v", t, names)
		}
	}
	return nil
}

// LengthNormalised reports whether the sequence log-probs must be means over the completion
// tokens (MeanLogProbs) rather than sums: TRL divides all_logps by the token count, for the
// policy and the reference and so for every type of the list, when "ipo" is one of them
// (concatenated_forward: `if "ipo" in self.loss_type`).
func LengthNormalised(types []string) bool { return slices.Contains(types, "ipo") }

// NeedsNLL reports whether the chosen rows' NLL is computed and logged as nll_loss: with rpo_alpha
// or loss_type sft (TRL: `if self.args.rpo_alpha is not None or "sft" in self.loss_type`).
func NeedsNLL(types []string, rpoAlpha float64) bool {
	return rpoAlpha > 0 || slices.Contains(types, "sft")
}

// ExoLabelSmoothing is the ε TRL's losses see once exo_pair has run: its dpo_loss sets
// self.label_smoothing = 1e-3 when it is 0, and the trainer keeps that value for every later call,
// of every loss type. posttrain applies it from the first micro-batch on (TRL: from exo_pair's first
// call, so only the types before exo_pair in the list see ε = 0, and only in the first micro-batch).
func ExoLabelSmoothing(types []string, eps float64) float64 {
	if eps == 0 && slices.Contains(types, "exo_pair") {
		return 1e-3
	}
	return eps
}

// Combine is TRL get_batch_loss_metrics over a list of loss types with weights w (nil = all 1):
//
//	L = Σ_i w_i·L_i,   rewards/chosen = Σ_i w_i·β·(log π(y_w) − log π_ref(y_w))  (likewise rejected)
//
// TRL adds each type's weighted rewards too, so with several types (or weights ≠ 1) the logged
// rewards, margins and accuracies are those of Σ_i w_i times the implicit reward; TRL logs no
// per-type loss. TRL sums the per-pair losses and then takes the mean; the mean of the sum here is
// the same up to rounding. One type with weight 1 returns its loss and metrics unchanged.
func Combine(types []string, weights []float64, p Pairs, o Params) (*Node, Metrics) {
	return combine(types, weights, p, o, true)
}

// CombinePairs is Combine before the mean over pairs: the per-pair Σ_i w_i·L_ib [B] (sft's NLL
// repeated for every pair, TRL's `sft_loss.expand(batch_size)`), for use_weighting (Weighted).
func CombinePairs(types []string, weights []float64, p Pairs, o Params) (*Node, Metrics) {
	return combine(types, weights, p, o, false)
}

func combine(types []string, weights []float64, p Pairs, o Params, mean bool) (*Node, Metrics) {
	var loss *Node
	var m Metrics
	for i, t := range types {
		l, mi := LossTypes[t](p, o)
		switch {
		case mean && l.Rank() > 0:
			l = ReduceAllMean(l)
		case !mean && l.Rank() == 0: // sft's NLL, the same for every pair
			l = BroadcastToDims(l, p.PolicyChosen.Shape().Dimensions...)
		}
		w := 1.0
		if weights != nil {
			w = weights[i]
		}
		if w != 1 {
			l = MulScalar(l, w)
			mi.RewardsChosen, mi.RewardsRejected = MulScalar(mi.RewardsChosen, w), MulScalar(mi.RewardsRejected, w)
		}
		if i == 0 {
			loss, m = l, mi
			continue
		}
		loss = Add(loss, l)
		m.RewardsChosen, m.RewardsRejected = Add(m.RewardsChosen, mi.RewardsChosen), Add(m.RewardsRejected, mi.RewardsRejected)
	}
	if len(types) > 1 || (weights != nil && weights[0] != 1) {
		m.Accuracies = ConvertDType(GreaterThan(m.RewardsChosen, m.RewardsRejected), m.RewardsChosen.DType())
		m.Margins = Sub(m.RewardsChosen, m.RewardsRejected)
	}
	return loss, m
}
