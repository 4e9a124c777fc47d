package qwen2

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Next tokens are drawn inside the prompt and decode graphs, on the accelerator: only the chosen
// token and its log-prob per row ([B] int32 and [B] float32) come back to the host, never the
// [B,V] logits (at V = 151,936 and B = 256 that copy, and a host-side softmax per row, would cost
// far more than the decode step itself).
//
// The draw is the Gumbel-max trick: token = argmax_v (x_v + g_v), x = logits/T, g_v = −log(−log u_v),
// which picks v with probability softmax(x)_v. u_v is a counter-based hash of (row key, v), so
// a draw is a pure function of the logits and the key: the same on every backend, reproducible,
// and checked token for token against a float64 reference on the host (sample_test.go).
// Top-k and top-p (HF's warpers, in HF's order: temperature, top-k, top-p) mask x to −∞ outside
// the kept set before the argmax; GoMLX has no sort, so each kept set is found by bisecting a
// threshold on d_v = max(x) − x_v (see keepTopK, keepTopP).

// SampleOptions choose how a next token is drawn from a row of logits, in HF's warper order:
// temperature, then top-k, then top-p.
type SampleOptions struct {
	// Temperature divides the logits; 0 (or less) means greedy: the argmax, ties to the lowest id.
	Temperature float64
	// TopK keeps the TopK largest scaled logits and every logit equal to the TopK-th (HF's
	// TopKLogitsWarper); 0 keeps all.
	TopK int
	// TopP keeps the smallest set of most probable tokens whose probability reaches TopP (HF's
	// TopPLogitsWarper: token v is kept when the tokens strictly more probable than v hold less
	// than TopP; tokens tied at the cut are all kept); 0 or ≥ 1 keeps all.
	TopP float64
}

// Greedy reports whether the options pick the argmax without drawing.
func (o SampleOptions) Greedy() bool { return o.Temperature <= 0 }

// drawMode selects the sampler's graph variant; each is compiled once and serves every value of
// the runtime parameters (sampleParams).
type drawMode int

const (
	drawGreedy    drawMode = iota // argmax of the logits
	drawFull                      // Gumbel-max over the whole tempered distribution
	drawTruncated                 // Gumbel-max over the top-k/top-p set
)

// mode is the graph variant that draws with these options at vocabulary size v.
func (o SampleOptions) mode(v int) drawMode {
	switch {
	case o.Greedy():
		return drawGreedy
	case o.TopK > 0 && o.TopK < v || o.TopP > 0 && o.TopP < 1:
		return drawTruncated
	}
	return drawFull
}

// sampleParams are the runtime inputs of the in-graph sampler, so that one compiled graph serves
// every temperature, top-k and top-p: keys [B] uint32 (one per row and step, see sampleKey), the
// temperature and topP as float32 scalars and topK as an int32 scalar (disabled ones set to
// keep everything: k = V, p = 1).
func sampleParams(opts SampleOptions, seed uint64, step, rows, vocab int) []any {
	keys := make([]uint32, rows)
	for r := range keys {
		keys[r] = sampleKey(seed, r, step)
	}
	temp := float32(opts.Temperature)
	if opts.Greedy() {
		temp = 1
	}
	k := int32(opts.TopK)
	if k <= 0 || int(k) > vocab {
		k = int32(vocab)
	}
	p := float32(opts.TopP)
	if p <= 0 || p >= 1 {
		p = 1
	}
	return []any{tensors.FromValue(keys), tensors.FromScalar(temp), tensors.FromScalar(k), tensors.FromScalar(p)}
}

// numSampleParams is len(sampleParams(...)): the inputs each generation graph takes after its own.
const numSampleParams = 4

// sampleKey is row r's key at decode step `step` of a generation seeded with seed: rows draw
// independently of each other and of the batch size, so a row's tokens depend only on (seed,
// row, its own logits).
func sampleKey(seed uint64, row, step int) uint32 {
	return uint32(splitMix64(splitMix64(seed)^splitMix64(uint64(row)<<32|uint64(uint32(step)))) >> 32)
}

// splitMix64 is SplitMix64's output function, to decorrelate nearby seeds.
func splitMix64(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Uniform noise: u_v = (⌊hash32(key ⊕ hash32(v)) / 2⁹⌋ + ½)·2⁻²³ ∈ (0, 1), exact in float32.
// hash32 is Wellons' lowbias32, a bijection on uint32; its shifts are written as divisions by
// powers of two, which every backend has (the pure-Go one lacks the shift ops).
const (
	hashMul1, hashMul2 = 0x7feb352d, 0x846ca68b
	noiseBits          = 23
)

// uniformNoise is u [B,V] float32 for keys [B] uint32.
func uniformNoise(keys *Node, vocab int) *Node {
	g := keys.Graph()
	b := keys.Shape().Dim(0)
	v := hash32(Iota(g, shapes.Make(dtypes.Uint32, vocab), 0))             // [V]
	h := hash32(BitwiseXor(BroadcastToDims(Reshape(keys, b, 1), b, vocab), // [B,V]
		BroadcastToDims(Reshape(v, 1, vocab), b, vocab)))
	m := ConvertDType(DivScalar(h, 1<<(32-noiseBits)), dtypes.Float32) // < 2²³, exact
	return MulScalar(AddScalar(m, 0.5), 1.0/(1<<noiseBits))
}

// hash32 is lowbias32 on uint32 nodes: x ^= x>>16; x *= m1; x ^= x>>15; x *= m2; x ^= x>>16.
func hash32(x *Node) *Node {
	shr := func(x *Node, n int) *Node { return DivScalar(x, float64(uint32(1)<<n)) }
	x = BitwiseXor(x, shr(x, 16))
	x = MulScalar(x, hashMul1)
	x = BitwiseXor(x, shr(x, 15))
	x = MulScalar(x, hashMul2)
	return BitwiseXor(x, shr(x, 16))
}

// sampleGraph draws one token per row from logits [B,V] (any float dtype) with the runtime
// parameters p = (keys, temperature, topK, topP) of sampleParams, by the variant mode. It returns
// the tokens [B] int32 and their log-probs [B] float32, log softmax(logits/T)[token] over the
// whole vocabulary: the tempered model distribution, before top-k/top-p (T = 1 when greedy).
func sampleGraph(logits *Node, p []*Node, mode drawMode) (tok, logProb *Node) {
	keys, temp, topK, topP := p[0], p[1], p[2], p[3]
	g := logits.Graph()
	b, vocab := logits.Shape().Dim(0), logits.Shape().Dim(1)
	x := Div(ConvertDType(logits, dtypes.Float32), temp) // [B,V] tempered logits
	score := x
	if mode != drawGreedy {
		gumbel := Neg(Log(Neg(Log(uniformNoise(keys, vocab))))) // [B,V] −log(−log u)
		score = Add(x, gumbel)
	}
	if mode == drawTruncated {
		d := MinScalar(Sub(ReduceAndKeep(x, ReduceMax, -1), x), maxNatsBelow) // [B,V] ≥ 0
		keep := keepTopP(d, keepTopK(d, topK), topP)
		score = Where(keep, score, BroadcastToDims(Infinity(g, dtypes.Float32, -1), b, vocab))
	}
	tok = ArgMax(score, -1, dtypes.Int32) // [B], ties to the lowest id
	chosen := Equal(Iota(g, shapes.Make(dtypes.Int32, b, vocab), 1), BroadcastToDims(Reshape(tok, b, 1), b, vocab))
	xTok := ReduceSum(Where(chosen, x, ZerosLike(x)), -1) // [B]
	m := ReduceAndKeep(x, ReduceMax, -1)                  // [B,1]
	lse := Add(Reshape(m, b), Log(ReduceSum(Exp(Sub(x, m)), -1)))
	return tok, Sub(xTok, lse)
}

// The threshold searches work on d = max(x) − x clipped at maxNatsBelow: a token that far below
// the best one has probability < e⁻⁶⁴ ≈ 1.6e-28 relative to it. bisectSteps halvings of
// [0, maxNatsBelow] reach adjacent float32 values for every d ≥ 2⁻⁹ and a bracket of 2⁻³⁴ below.
const (
	maxNatsBelow = 64
	bisectSteps  = 40
)

// keepTopK is the mask [B,V] of HF's top-k: d ≤ d_(k), the k-th smallest d of the row, so ties
// with the k-th are kept. Bisection keeps count(d ≤ hi) ≥ k and count(d ≤ lo) < k.
func keepTopK(d, k *Node) *Node {
	g := d.Graph()
	b := d.Shape().Dim(0)
	count := func(t *Node) *Node { // [B]: how many d ≤ t (t [B])
		return ReduceSum(ConvertDType(LessOrEqual(d, Reshape(t, b, 1)), dtypes.Int32), -1)
	}
	lo, hi := Zeros(g, shapes.Make(dtypes.Float32, b)), BroadcastToDims(Scalar(g, dtypes.Float32, maxNatsBelow), b)
	for range bisectSteps {
		mid := MulScalar(Add(lo, hi), 0.5)
		enough := GreaterOrEqual(count(mid), BroadcastToDims(k, b))
		lo, hi = Where(enough, lo, mid), Where(enough, mid, hi)
	}
	return LessOrEqual(d, Reshape(hi, b, 1))
}

// keepTopP is the mask [B,V] of HF's top-p over the tokens already kept: with p_v = softmax(−d)
// over them, v stays when F(d_v) = Σ_{kept u: d_u < d_v} p_u < topP. F grows with d, so the kept
// set is d ≤ t for the largest such t; bisection keeps F(lo) < topP ≤ F(hi).
func keepTopP(d, kept, topP *Node) *Node {
	g := d.Graph()
	b := d.Shape().Dim(0)
	w := Where(kept, Exp(Neg(d)), ZerosLike(d))                                                                  // [B,V] unnormalised probabilities
	w = Div(w, ReduceAndKeep(w, ReduceSum, -1))                                                                  // [B,V] p_v over the kept tokens
	below := func(t *Node) *Node { return ReduceSum(Where(LessThan(d, Reshape(t, b, 1)), w, ZerosLike(w)), -1) } // F(t) [B]
	lo, hi := Zeros(g, shapes.Make(dtypes.Float32, b)), BroadcastToDims(Scalar(g, dtypes.Float32, 2*maxNatsBelow), b)
	for range bisectSteps + 1 {
		mid := MulScalar(Add(lo, hi), 0.5)
		under := LessThan(below(mid), BroadcastToDims(topP, b))
		lo, hi = Where(under, mid, lo), Where(under, hi, mid)
	}
	return And(kept, LessOrEqual(d, Reshape(lo, b, 1)))
}

// logSumExp is log Σ exp(x) computed stably.
func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return m
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}
