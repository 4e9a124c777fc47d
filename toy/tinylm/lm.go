// Package tinylm is the course's TinyLM (phases 8-12) in exact float64: a "language model" whose
// parameters are one logit row per (prompt, prefix), trained by REINFORCE with a KL penalty, RLHF
// with a reward model and PPO, DPO, KTO, GRPO and its variants.
//
// It reproduces every printed line of the course byte for byte and every golden value to ~1e-15
// (libm ulps), consuming CPython's random stream in the same order (see testdata/README.md). It
// is the oracle the GoMLX trainers in trainers/ are checked against. Sums run left to right as
// CPython 3.11's sum(); float64(x*y) conversions keep Go from fusing multiply-adds (arm64), which
// Python never does.
//
// For a trainer: RowKeys indexes a fixed parameter table; TinyLM.SetLogits loads trained rows;
// the New*Result constructors score a trained model and the Print* functions print the course's
// lines from those results; every result marshals to the goldens' JSON keys.
package tinylm

import (
	"math"
	"strings"

	"github.com/posttrain/posttrain/internal/pyrand"
)

// Vocab is the token list; its order is the order of rng.choices' cumulative weights.
var Vocab = []string{"1", "2", "6", "7", "<eos>"}

// EOS is the index of "<eos>" in Vocab.
const EOS = 4

// MaxNewTokens bounds a response: it ends at <eos> or after 3 tokens.
const MaxNewTokens = 3

// Prompts are the keys of the course's ANSWERS in insertion order: every loop over prompts uses it.
var Prompts = []string{"3×4=", "2×3="}

// Answers maps a prompt to its correct digits (the course's ANSWERS).
var Answers = map[string]string{"3×4=": "12", "2×3=": "6"}

// probs is the course's _probs: the listed tokens' probabilities in Vocab order, 0.05 for the
// others, without renormalisation.
func probs(d map[string]float64) []float64 {
	p := make([]float64, len(Vocab))
	for i, tok := range Vocab {
		p[i] = 0.05
		if v, ok := d[tok]; ok {
			p[i] = v
		}
	}
	return p
}

// SFTProbs is the starting (SFT) policy, also the reference π_ref, for the three prefixes it lists.
var SFTProbs = map[Key][]float64{
	{"3×4=", ""}:  probs(map[string]float64{"1": 0.4, "7": 0.4, "2": 0.1, "6": 0.05, "<eos>": 0.05}),
	{"3×4=", "1"}: probs(map[string]float64{"2": 0.5, "<eos>": 0.3, "1": 0.1, "6": 0.05, "7": 0.05}),
	{"2×3=", ""}:  probs(map[string]float64{"6": 0.3, "7": 0.3, "1": 0.2, "2": 0.1, "<eos>": 0.1}),
}

// DefaultProbs is every other prefix's start: mostly stop at once (0.8), 0.05 for each digit.
var DefaultProbs = probs(map[string]float64{"<eos>": 0.8})

// Key names one logit row: a prompt and the response prefix before the next token, joined
// ("12" for ['1', '2']; prefixes never hold <eos>).
type Key struct{ Prompt, Prefix string }

// String is the goldens' spelling, "<prompt>|<prefix>", e.g. "3×4=|1".
func (k Key) String() string { return k.Prompt + "|" + k.Prefix }

// prefixKey returns the Key of the row that scores the token after tokens.
func prefixKey(prompt string, tokens []int) Key {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteString(Vocab[t])
	}
	return Key{prompt, b.String()}
}

// TinyLM holds one logit row per (prompt, prefix), created lazily from SFTProbs/DefaultProbs.
// It remembers the order rows were first created (the goldens list rows in that order).
type TinyLM struct {
	rows  map[Key][]float64
	order []Key
}

// New returns the SFT model with no rows yet.
func New() *TinyLM { return &TinyLM{rows: map[Key][]float64{}} }

// row returns the logit row of key, creating it as log(SFT or default probabilities) if new.
func (lm *TinyLM) row(k Key) []float64 {
	r, ok := lm.rows[k]
	if !ok {
		p, ok := SFTProbs[k]
		if !ok {
			p = DefaultProbs
		}
		r = make([]float64, len(p))
		for i, pi := range p {
			r[i] = math.Log(pi)
		}
		lm.rows[k] = r
		lm.order = append(lm.order, k)
	}
	return r
}

// Dist is π(· | x, y<t), the softmax of the prefix's row (created if new).
func (lm *TinyLM) Dist(prompt string, prefix []int) []float64 {
	return softmax(lm.row(prefixKey(prompt, prefix)))
}

// Sample draws a response with one rng.Choices per token, stopping after <eos> or MaxNewTokens.
func (lm *TinyLM) Sample(prompt string, rng *pyrand.Rand) []int {
	var tokens []int
	for len(tokens) < MaxNewTokens {
		tok := rng.Choices(lm.Dist(prompt, tokens))
		tokens = append(tokens, tok)
		if tok == EOS {
			break
		}
	}
	return tokens
}

// TokenLogps returns the terms of 식 (8.2): log π(y_t | x, y<t) for each t.
func (lm *TinyLM) TokenLogps(prompt string, tokens []int) []float64 {
	out := make([]float64, len(tokens))
	for t, tok := range tokens {
		out[t] = math.Log(lm.Dist(prompt, tokens[:t])[tok])
	}
	return out
}

// GradToken returns the row key of y_t's prefix and ∂ log π(y_t | x, y<t) / ∂(that row)
// = onehot(y_t) − π (식 (5.2)).
func (lm *TinyLM) GradToken(prompt string, tokens []int, t int) (Key, []float64) {
	p := lm.Dist(prompt, tokens[:t])
	g := make([]float64, len(p))
	for i, pi := range p {
		one := 0.0
		if i == tokens[t] {
			one = 1.0
		}
		g[i] = one - pi
	}
	return prefixKey(prompt, tokens[:t]), g
}

// Apply takes one gradient-ascent step: row += lr·g for every row of grads, in first-touch order.
func (lm *TinyLM) Apply(grads *Grads, lr float64) {
	for _, k := range grads.order {
		r := lm.row(k)
		for i, gi := range grads.m[k] {
			r[i] += float64(lr * gi)
		}
	}
}

// Copy returns an independent copy (rows and their creation order).
func (lm *TinyLM) Copy() *TinyLM {
	other := New()
	for _, k := range lm.order {
		other.rows[k] = append([]float64(nil), lm.rows[k]...)
		other.order = append(other.order, k)
	}
	return other
}

// Logits returns a copy of every row in first-creation order.
func (lm *TinyLM) Logits() Logits {
	out := make(Logits, len(lm.order))
	for i, k := range lm.order {
		out[i] = LogitRow{Key: k, Logits: append([]float64(nil), lm.rows[k]...)}
	}
	return out
}

// SetLogits loads rows (in their order) into lm, creating the ones it lacks; the GoMLX trainers
// use it to score their trained parameters with the oracle's p_correct and kl.
func (lm *TinyLM) SetLogits(rows Logits) {
	for _, r := range rows {
		copy(lm.row(r.Key), r.Logits)
	}
}

// Grads accumulates logit gradients per row, remembering first-touch order (the course's dict).
type Grads struct {
	m     map[Key][]float64
	order []Key
}

// NewGrads returns an empty accumulator.
func NewGrads() *Grads { return &Grads{m: map[Key][]float64{}} }

// Add is the course's add_grad: grads[key][i] += scale·g[i].
func (g *Grads) Add(k Key, grad []float64, scale float64) {
	acc, ok := g.m[k]
	if !ok {
		acc = make([]float64, len(Vocab))
		g.m[k] = acc
		g.order = append(g.order, k)
	}
	for i, gi := range grad {
		acc[i] += float64(scale * gi)
	}
}

// AddSeq is the course's add_seq_grad: scale·∇ log π(y|x) = scale·Σ_t ∇ log π(y_t | x, y<t).
func (g *Grads) AddSeq(lm *TinyLM, prompt string, tokens []int, scale float64) {
	for t := range tokens {
		k, gt := lm.GradToken(prompt, tokens, t)
		g.Add(k, gt, scale)
	}
}

// Rows returns the accumulated gradient rows in first-touch order.
func (g *Grads) Rows() Logits {
	out := make(Logits, len(g.order))
	for i, k := range g.order {
		out[i] = LogitRow{Key: k, Logits: append([]float64(nil), g.m[k]...)}
	}
	return out
}

// LogitRow is one row of logits (or of a gradient) in Vocab order.
type LogitRow struct {
	Key    Key
	Logits []float64
}

// Logits is an ordered list of rows; it marshals as the goldens' {"<prompt>|<prefix>": [5 logits]}.
type Logits []LogitRow

// Get returns the row of key k, or nil.
func (l Logits) Get(k Key) []float64 {
	for _, r := range l {
		if r.Key == k {
			return r.Logits
		}
	}
	return nil
}

// softmax is the course's: exp(x − max) / Σ exp, the sum left to right.
func softmax(logits []float64) []float64 {
	m := logits[0]
	for _, x := range logits[1:] {
		if x > m {
			m = x
		}
	}
	e := make([]float64, len(logits))
	s := 0.0
	for i, x := range logits {
		e[i] = math.Exp(x - m)
		s += e[i]
	}
	for i := range e {
		e[i] /= s
	}
	return e
}

// Sigmoid is σ(x) = 1 / (1 + e^(−x)).
func Sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// RowKeys lists every row a model can have: for each prompt in order, the prefixes of up to
// MaxNewTokens−1 non-<eos> tokens (21 per prompt), depth first in Vocab order — the order
// AllResponses creates them in on a fresh model. A fixed-size parameter table can index by it.
func RowKeys() []Key {
	var out []Key
	var walk func(x string, prefix []int)
	walk = func(x string, prefix []int) {
		out = append(out, prefixKey(x, prefix))
		if len(prefix)+1 == MaxNewTokens {
			return
		}
		for tok := range Vocab {
			if tok != EOS {
				walk(x, append(append([]int(nil), prefix...), tok))
			}
		}
	}
	for _, x := range Prompts {
		walk(x, nil)
	}
	return out
}
