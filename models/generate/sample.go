package generate

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
// Top-k, top-p and min-p (HF's warpers, in HF's order: temperature, top-k, top-p, min-p) mask x
// to −∞ outside the kept set before the argmax; GoMLX has no sort, so each kept set is a cut-off on
// d_v = max(x) − x_v found by a digit-by-digit histogram search (see truncate).

// SampleOptions choose how a next token is drawn from a row of logits, in HF's warper order:
// temperature, then top-k, then top-p, then min-p.
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
	// MinP keeps, after top-k and top-p, the tokens whose probability is at least MinP times the
	// most probable one's (HF's MinPLogitsWarper); 0 keeps all.
	MinP float64
	// RepetitionPenalty scales the logit l of every token already in the row (its prompt, padding
	// excluded, and the tokens generated so far) before the temperature: l/θ when l > 0, l·θ
	// otherwise (HF's RepetitionPenaltyLogitsProcessor, CTRL); 0 or 1 is off.
	RepetitionPenalty float64
}

// Greedy reports whether the options pick the argmax without drawing.
func (o SampleOptions) Greedy() bool { return o.Temperature <= 0 }

// drawMode selects the sampler's graph variant; each is compiled once and serves every value of
// the runtime parameters (sampleParams). The zero value is greedy.
type drawMode struct {
	noise            bool // Gumbel-max draw; otherwise the argmax of the logits
	topK, topP, minP bool // the warpers that can remove tokens
	penalty          bool // repetition penalty: the graphs carry a [B,V] "seen" mask
}

// mode is the graph variant that draws with these options at vocabulary size v.
func (o SampleOptions) mode(v int) drawMode {
	penalty := o.RepetitionPenalty > 0 && o.RepetitionPenalty != 1
	if o.Greedy() {
		return drawMode{penalty: penalty}
	}
	return drawMode{noise: true, topK: o.TopK > 0 && o.TopK < v, topP: o.TopP > 0 && o.TopP < 1, minP: o.MinP > 0, penalty: penalty}
}

// sampleInputs are the runtime inputs of the in-graph sampler (sampleParams), so that one compiled
// graph serves every temperature, top-k, top-p and min-p. T is any on the host and *Node in the
// graph (internal/named).
type sampleInputs[T any] struct {
	Keys        T // [B] uint32: one per row and step (sampleKey)
	Temperature T // float32
	TopK        T // int32 (disabled: V)
	TopP        T // float32 (disabled: 1)
	MinPD       T // float32: min-p as the largest kept d = −ln MinP (disabled: +∞)
	Theta       T // float32: the repetition penalty θ (disabled: 1)
}

// sampleParams are the sampler's runtime inputs for n steps from step: keys one per row and step
// (see sampleKey; [B] for one step, [B,n] for several), the temperature, topK and topP (disabled
// ones set to keep everything: k = V, p = 1), min-p's d and the repetition penalty θ.
func sampleParams(opts SampleOptions, seed uint64, step, n, rows, vocab int) sampleInputs[any] {
	keys := make([]uint32, rows*n)
	for r := range rows {
		for i := range n {
			keys[r*n+i] = sampleKey(seed, r, step+i)
		}
	}
	keyDims := []int{rows}
	if n > 1 {
		keyDims = append(keyDims, n)
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
	minPD := float32(math.Inf(1))
	if opts.MinP > 0 {
		minPD = float32(-math.Log(opts.MinP))
	}
	theta := float32(opts.RepetitionPenalty)
	if theta <= 0 {
		theta = 1
	}
	return sampleInputs[any]{Keys: tensors.FromFlatDataAndDimensions(keys, keyDims...), Temperature: tensors.FromScalar(temp), TopK: tensors.FromScalar(k),
		TopP: tensors.FromScalar(p), MinPD: tensors.FromScalar(minPD), Theta: tensors.FromScalar(theta)}
}

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
// parameters p (sampleParams: keys, temperature, topK, topP, min-p's largest d, θ), by the
// variant mode; seen [B,V] bool marks the tokens the repetition penalty applies to (nil without
// it). It returns the tokens [B] int32 and their log-probs [B] float32,
// log softmax(logits/T)[token] over the whole vocabulary: the tempered model distribution, before
// the repetition penalty and top-k/top-p/min-p (T = 1 when greedy), which is what a trainer scores.
func sampleGraph(logits *Node, p sampleInputs[*Node], mode drawMode, seen *Node) (tok, logProb *Node) {
	keys, temp, topK, topP, minPD, theta := p.Keys, p.Temperature, p.TopK, p.TopP, p.MinPD, p.Theta
	g := logits.Graph()
	b, vocab := logits.Shape().Dim(0), logits.Shape().Dim(1)
	l := ConvertDType(logits, dtypes.Float32) // [B,V]
	x := Div(l, temp)                         // [B,V] tempered logits
	score := x
	if mode.penalty { // CTRL's penalty on the raw logits, then the temperature
		penalised := Where(GreaterThan(l, ZerosLike(l)), Div(l, theta), Mul(l, theta))
		score = Div(Where(seen, penalised, l), temp)
	}
	drawn := score // the logits the draw and the warpers see
	if mode.noise {
		gumbel := Neg(Log(Neg(Log(uniformNoise(keys, vocab))))) // [B,V] −log(−log u)
		score = Add(drawn, gumbel)
	}
	if mode.topK || mode.topP || mode.minP {
		score = Where(truncate(drawn, topK, topP, minPD, mode), score, BroadcastToDims(Infinity(g, dtypes.Float32, -1), b, vocab))
	}
	tok = ArgMax(score, -1, dtypes.Int32) // [B], ties to the lowest id
	chosen := Equal(Iota(g, shapes.Make(dtypes.Int32, b, vocab), 1), BroadcastToDims(Reshape(tok, b, 1), b, vocab))
	xTok := ReduceSum(Where(chosen, x, ZerosLike(x)), -1) // [B]
	// The log-sum-exp's shift is max(l)/T, max x up to rounding (any shift keeps lse exact), not
	// the max x truncate takes: on XLA's CPU plugin (jaxlib 0.11.2's XLA), sharing that one
	// reduction between truncate and this log-softmax changed the drawn token of 5 of the 2,304
	// rows of TestSampleGraph_MatchesReference (all top-k or top-p rows), by up to 3.2 nats, to
	// tokens the reference does not draw (not root-caused: the optimised HLO reads right, and
	// with XLA's algebraic simplifier off it does not happen); with its own reduction every row
	// agrees.
	m := Div(ReduceAndKeep(l, ReduceMax, -1), temp) // [B,1]
	lse := Add(Reshape(m, b), Log(ReduceSum(Exp(Sub(x, m)), -1)))
	return tok, Sub(xTok, lse)
}

// Top-k and top-p both keep the tokens whose d is at most a cut-off. d is quantised to
// q = ⌊d·2^quantBits⌋ (int32; d ≤ maxNatsBelow, so q < 2^qBits): tokens closer than
// 2⁻²⁰ ≈ 9.5e-7 nats count as tied, and ties at the cut are all kept. The cut-off is found digit
// by digit, most significant first: one pass over [B,V] per digit with a histogram of its values
// (a scatter-add), instead of a sort. A token more than maxNatsBelow below the best one has
// probability < e⁻⁶⁴ ≈ 1.6e-28 relative to it, and shares the last q.
const (
	maxNatsBelow = 64
	quantBits    = 20
	qBits        = 27 // bits of q: 64·2²⁰ = 2²⁶ needs 27
)

// digitBits is the width of one search digit at vocabulary size v: 9 bits (3 passes, 512-bin
// histograms) for real vocabularies, fewer for tiny ones, whose histograms would cost more than
// their passes.
func digitBits(v int) int {
	bits := 2
	for bits < 9 && 1<<bits < v {
		bits++
	}
	return bits
}

// truncate is the mask [B,V] of the tokens top-k, top-p then min-p keep from the tempered logits
// x [B,V], for the warpers mode enables; topK is an int32 scalar, topP and minPD (−ln MinP)
// float32 scalars.
func truncate(x, topK, topP, minPD *Node, mode drawMode) *Node {
	b := x.Shape().Dim(0)
	d := MinScalar(Sub(ReduceAndKeep(x, ReduceMax, -1), x), maxNatsBelow) // [B,V] nats below the best
	q := ConvertDType(Floor(MulScalar(d, 1<<quantBits)), dtypes.Int32)    // [B,V]
	kept := BroadcastToDims(Const(x.Graph(), true), q.Shape().Dimensions...)
	if mode.topK { // HF's TopKLogitsWarper: q ≤ the k-th smallest q, ties with it kept.
		k := BroadcastToDims(ConvertDType(topK, dtypes.Float32), b)
		kept = LessOrEqual(q, Reshape(cutoff(q, OnesLike(d), k), b, 1))
	}
	if mode.topP { // HF's TopPLogitsWarper over the top-k set, p_v = softmax(−d) there: v stays
		// when the tokens strictly more probable hold < topP: q_v ≤ q* = min{q : Σ_{q_u ≤ q} p_u ≥ topP}.
		w := Where(kept, Exp(Neg(d)), ZerosLike(d))
		w = Div(w, ReduceAndKeep(w, ReduceSum, -1)) // [B,V]
		kept = And(kept, LessOrEqual(q, Reshape(cutoff(q, w, BroadcastToDims(topP, b)), b, 1)))
	}
	if mode.minP { // HF's MinPLogitsWarper: p_v ≥ MinP·max p, i.e. d_v ≤ −ln MinP (the best token is kept)
		kept = And(kept, LessOrEqual(d, BroadcastToDims(minPD, d.Shape().Dimensions...)))
	}
	return kept
}

// cutoff returns q* [B] int32 = min{q : Σ_{v: q_v ≤ q} w_v ≥ target} for each row of q [B,V]
// (int32 in [0, 2^qBits)), weights w [B,V] (float32 ≥ 0) and target [B]; when the row's total
// stays below target, q* is the largest code (every token kept). One histogram pass per digit of
// q, most significant first, over the tokens that share the digits chosen so far.
func cutoff(q, w, target *Node) *Node {
	g := q.Graph()
	b, vocab := q.Shape().Dim(0), q.Shape().Dim(1)
	width := digitBits(vocab)
	bins := 1 << width
	levels := (qBits + width - 1) / width
	rowBase := MulScalar(Iota(g, shapes.Make(dtypes.Int32, b, vocab), 0), bins) // [B,V] row·bins
	binIota := Iota(g, shapes.Make(dtypes.Int32, b, bins), 1)
	in := BroadcastToDims(Const(g, true), b, vocab)   // [B,V] tokens under the digits chosen so far
	prefix := Zeros(g, shapes.Make(dtypes.Int32, b))  // [B] the digits chosen so far, as a number
	below := Zeros(g, shapes.Make(dtypes.Float32, b)) // [B] weight of the tokens below the prefix
	for level := range levels {
		high := DivScalar(q, 1<<(width*(levels-1-level)))          // [B,V] q's digits down to this one
		digit := Sub(high, MulScalar(DivScalar(high, bins), bins)) // [B,V] this digit
		at := Reshape(Add(rowBase, digit), b*vocab, 1)             // [B·V,1] flat histogram bins
		hist := ScatterSum(Zeros(g, shapes.Make(dtypes.Float32, b*bins)), at, Reshape(Where(in, w, ZerosLike(w)), b*vocab), false, false)
		hist = Reshape(hist, b, bins)                     // [B,bins]
		cum := Add(PrefixSum(hist), Reshape(below, b, 1)) // [B,bins] weight up to and including each bin
		chosen := ReduceSum(ConvertDType(LessThan(cum, Reshape(target, b, 1)), dtypes.Int32), 1)
		chosen = MinScalar(chosen, bins-1) // [B] the first bin reaching target
		below = Add(below, ReduceSum(Where(LessThan(binIota, Reshape(chosen, b, 1)), hist, ZerosLike(hist)), 1))
		prefix = Add(MulScalar(prefix, bins), chosen)
		in = And(in, Equal(digit, Reshape(chosen, b, 1)))
	}
	return prefix
}

// PrefixSum is the inclusive cumulative sum of h [B,n] along its last axis, in log₂ n shifted
// additions (the pure-Go backend's CumSum is a reduce-window, O(n²) per row).
func PrefixSum(h *Node) *Node {
	b, n := h.Shape().Dim(0), h.Shape().Dim(1)
	for s := 1; s < n; s *= 2 {
		shifted := Concatenate([]*Node{Zeros(h.Graph(), shapes.Make(h.DType(), b, s)), Slice(h, AxisRange(), AxisRange(0, n-s))}, 1)
		h = Add(h, shifted)
	}
	return h
}

// seenTokens is the repetition penalty's mask [B,V]: the tokens of ids [B,S] where mask is 1.
func seenTokens(ids, mask *Node, vocab int) *Node {
	g := ids.Graph()
	b, n := ids.Shape().Dim(0), ids.Shape().Dim(1)
	rows := MulScalar(Iota(g, shapes.Make(dtypes.Int32, b, n), 0), vocab)
	at := Reshape(Add(rows, ConvertDType(ids, dtypes.Int32)), b*n, 1)
	hits := ScatterSum(Zeros(g, shapes.Make(dtypes.Float32, b*vocab)), at, Reshape(ConvertDType(mask, dtypes.Float32), b*n), false, false)
	return Reshape(GreaterThan(hits, ZerosLike(hits)), b, vocab)
}

// seeToken adds tok [B,1] to the mask seen [B,V].
func seeToken(seen, tok *Node) *Node {
	b, vocab := seen.Shape().Dim(0), seen.Shape().Dim(1)
	iota := Iota(seen.Graph(), shapes.Make(dtypes.Int32, b, vocab), 1)
	return Or(seen, Equal(iota, BroadcastToDims(ConvertDType(tok, dtypes.Int32), b, vocab)))
}
