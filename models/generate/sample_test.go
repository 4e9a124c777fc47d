package generate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
)

// The in-graph sampler is checked against a float64 reference written from the definitions:
// the same hash noise, HF's warpers by full sorts, the argmax of x + g over the kept tokens.

// refHash32 is lowbias32 with Go's shifts.
func refHash32(x uint32) uint32 {
	x ^= x >> 16
	x *= hashMul1
	x ^= x >> 15
	x *= hashMul2
	return x ^ x>>16
}

// refUniform is u for (key, v), computed as the graph does (exact in float32 and float64).
func refUniform(key uint32, v int) float64 {
	h := refHash32(key ^ refHash32(uint32(v)))
	return (float64(h>>(32-noiseBits)) + 0.5) / (1 << noiseBits)
}

// refKept returns, ascending, the ids HF's top-k then top-p keep from the tempered logits x
// (float32, as the graph computes them), deciding on the quantised distances q = ⌊d·2²⁰⌋,
// d = min(max x − x, 64) in float32: top-k keeps q ≤ the k-th smallest q; top-p keeps v when the
// tokens with a smaller q (among those top-k kept) hold less than p. ambiguous reports a q group
// whose mass above lies within 1e-5 of p, where float32 sums may decide either way.
func refKept(x []float32, k int, p, minP float64) (kept []int, ambiguous bool) {
	kept, ambiguous = refKeptTopKP(x, k, p)
	if minP <= 0 {
		return kept, ambiguous
	}
	// min-p (HF's MinPLogitsWarper) on what is left: p_v ≥ minP·max p ⇔ d_v ≤ −ln minP.
	m, limit := slices.Max(x), -math.Log(minP)
	var out []int
	for _, v := range kept {
		d := float64(min(m-x[v], maxNatsBelow))
		if math.Abs(d-limit) < 1e-5 {
			ambiguous = true
		}
		if d <= limit {
			out = append(out, v)
		}
	}
	return out, ambiguous
}

// refKeptTopKP is refKept's top-k and top-p.
func refKeptTopKP(x []float32, k int, p float64) (kept []int, ambiguous bool) {
	m := slices.Max(x)
	q, d := make([]int32, len(x)), make([]float32, len(x))
	for i, v := range x {
		d[i] = min(m-v, maxNatsBelow)
		q[i] = int32(math.Floor(float64(d[i] * (1 << quantBits))))
	}
	order := make([]int, len(x)) // by ascending q
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return q[order[a]] < q[order[b]] })
	n := len(x)
	if k > 0 && k < len(x) {
		n = k
		for n < len(x) && q[order[n]] == q[order[k-1]] {
			n++
		}
	}
	order = order[:n]
	if p <= 0 || p >= 1 {
		kept = slices.Clone(order)
		slices.Sort(kept)
		return kept, false
	}
	probs := make([]float64, n)
	z := 0.0
	for i, id := range order {
		probs[i] = math.Exp(-float64(d[id]))
		z += probs[i]
	}
	above := 0.0 // mass of the tokens with a smaller q than order[i]
	for i := 0; i < n; {
		j := i // order[i:j] share one q
		for j < n && q[order[j]] == q[order[i]] {
			j++
		}
		if math.Abs(above-p) < 1e-5 {
			ambiguous = true
		}
		if above < p {
			kept = append(kept, order[i:j]...)
		}
		for _, pr := range probs[i:j] {
			above += pr / z
		}
		i = j
	}
	slices.Sort(kept)
	return kept, ambiguous
}

// refDraw is one row's draw: the token, its tempered log-prob, and the gap between the best and
// second-best perturbed scores (a tie within float32 rounding may go either way).
// seen (nil without a repetition penalty) marks the penalised tokens.
func refDraw(logits []float32, key uint32, opts SampleOptions, seen []bool) (tok int, lp, gap float64, ambiguous bool) {
	temp := float32(opts.Temperature)
	if opts.Greedy() {
		temp = 1
	}
	theta := float32(opts.RepetitionPenalty)
	x32, drawn, x := make([]float32, len(logits)), make([]float64, len(logits)), make([]float64, len(logits))
	for i, l := range logits {
		x[i] = float64(l / temp)
		if seen != nil && seen[i] { // CTRL's penalty on the raw logit, then the temperature
			if l > 0 {
				l /= theta
			} else {
				l *= theta
			}
		}
		x32[i] = l / temp
		drawn[i] = float64(x32[i])
	}
	kept := make([]int, len(x))
	for i := range kept {
		kept[i] = i
	}
	if m := opts.mode(len(x)); m.topK || m.topP || m.minP {
		kept, ambiguous = refKept(x32, opts.TopK, opts.TopP, opts.MinP)
	}
	best, second := math.Inf(-1), math.Inf(-1)
	for _, v := range kept {
		s := drawn[v]
		if !opts.Greedy() {
			s -= math.Log(-math.Log(refUniform(key, v)))
		}
		if s > best {
			best, second, tok = s, best, v
		} else if s > second {
			second = s
		}
	}
	return tok, x[tok] - logSumExp(x), best - second, ambiguous
}

// drawInputs are the inputs of sampleGraph's test graphs: logits [B,V], the sampler's parameters
// and, with a repetition penalty, the seen mask [B,V].
type drawInputs[T any] struct {
	Logits T
	Sample sampleInputs[T]
	Seen   []T
}

// drawGraph is sampleGraph on drawInputs, by sig's names.
func drawGraph(sig *named.Signature, mode drawMode) func(in []*graph.Node) (*graph.Node, *graph.Node) {
	return func(nodes []*graph.Node) (*graph.Node, *graph.Node) {
		in := named.Bind[drawInputs[*graph.Node]](sig.Inputs(nodes))
		var seen *graph.Node
		if mode.penalty {
			seen = in.Seen[0]
		}
		return sampleGraph(in.Logits, in.Sample, mode, seen)
	}
}

// drawOnDevice runs sampleGraph on logits [B][V] with keys (one per row) and, with a repetition
// penalty, the seen mask [B][V], and returns the tokens and log-probs.
func drawOnDevice(t *testing.T, logits [][]float32, keys []uint32, opts SampleOptions, seen [][]bool) ([]int32, []float32) {
	t.Helper()
	vocab := len(logits[0])
	mode := opts.mode(vocab)
	var sig named.Signature
	e, err := graph.NewExec(backend.SharedForTests(), drawGraph(&sig, mode))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	in := drawInputs[any]{Logits: tensors.FromValue(logits), Sample: sampleParams(opts, 0, 0, 1, len(logits), vocab)}
	in.Sample.Keys = tensors.FromValue(keys)
	if mode.penalty {
		in.Seen = []any{tensors.FromValue(seen)}
	}
	args, err := sig.Args(named.Of[any](in))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.Exec(args...)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[int32](outs[0]), tensors.MustCopyFlatData[float32](outs[1])
}

var samplerCases = []SampleOptions{
	{},
	{Temperature: 1},
	{Temperature: 0.7},
	{Temperature: 1.5, TopK: 5},
	{Temperature: 1, TopP: 0.9},
	{Temperature: 0.6, TopK: 50, TopP: 0.95},
	{Temperature: 1, TopK: 1},
	{Temperature: 2, TopP: 0.3},
	{Temperature: 1, MinP: 0.1},
	{Temperature: 0.8, TopK: 40, TopP: 0.9, MinP: 0.05},
	{RepetitionPenalty: 1.5},
	{Temperature: 0.9, TopP: 0.9, RepetitionPenalty: 1.3},
}

// Every row's token is the reference's, except where the reference itself is within float32
// rounding of a tie; log-probs agree to float32 accuracy.
func TestSampleGraph_MatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, vocab := range []int{7, 300, 5000} {
		for ci, opts := range samplerCases {
			t.Run(fmt.Sprintf("V%d/%+v", vocab, opts), func(t *testing.T) {
				const rows = 64
				logits, keys, seen := make([][]float32, rows), make([]uint32, rows), make([][]bool, rows)
				for r := range logits {
					scale := []float64{0.3, 1, 4, 12}[r%4]
					logits[r], seen[r] = make([]float32, vocab), make([]bool, vocab)
					for v := range logits[r] {
						logits[r][v] = float32(rng.NormFloat64() * scale)
						if r%8 == 7 { // ties
							logits[r][v] = float32(math.Round(float64(logits[r][v])))
						}
						seen[r][v] = rng.IntN(3) == 0
					}
					keys[r] = rng.Uint32()
				}
				toks, lps := drawOnDevice(t, logits, keys, opts, seen)
				skipped := 0
				for r := range rows {
					rowSeen := seen[r]
					if !opts.mode(vocab).penalty {
						rowSeen = nil
					}
					want, wantLP, gap, amb := refDraw(logits[r], keys[r], opts, rowSeen)
					if amb || gap < 1e-4 {
						skipped++
						continue
					}
					if int(toks[r]) != want {
						t.Errorf("case %d row %d: token %d, reference %d (gap %.3g)", ci, r, toks[r], want, gap)
						continue
					}
					if d := math.Abs(float64(lps[r]) - wantLP); d > 2e-5*max(1, math.Abs(wantLP)) {
						t.Errorf("case %d row %d: log-prob %v, reference %v", ci, r, lps[r], wantLP)
					}
				}
				if skipped > rows/8 {
					t.Errorf("%d of %d rows were near-ties: the comparison is too weak", skipped, rows)
				}
			})
		}
	}
}

// Top-k keeps every token tied with the k-th; top-p keeps tokens tied at the cut; the kept sets
// are what the draws come from.
func TestSampleGraph_KeptSets(t *testing.T) {
	logits := []float32{1, 3, 2, 3, 0, 2}
	for _, c := range []struct {
		opts SampleOptions
		want []int
	}{
		{SampleOptions{Temperature: 1, TopK: 1}, []int{1, 3}},
		{SampleOptions{Temperature: 1, TopK: 2}, []int{1, 3}},
		{SampleOptions{Temperature: 1, TopK: 3}, []int{1, 2, 3, 5}},
		{SampleOptions{Temperature: 1, TopP: 0.5}, []int{1, 3}},
		{SampleOptions{Temperature: 1, TopP: 0.9}, []int{1, 2, 3, 5}},
		{SampleOptions{Temperature: 1, TopK: 3, TopP: 0.99}, []int{1, 2, 3, 5}},
		{SampleOptions{Temperature: 1, MinP: 0.3}, []int{1, 2, 3, 5}}, // e⁻¹ ≥ 0.3 > e⁻²
		{SampleOptions{Temperature: 1, MinP: 0.5}, []int{1, 3}},
		{SampleOptions{Temperature: 1, TopP: 0.5, MinP: 0.01}, []int{1, 3}},
	} {
		if ref, _ := refKept(logits, c.opts.TopK, c.opts.TopP, c.opts.MinP); !slices.Equal(ref, c.want) {
			t.Fatalf("%+v: reference keeps %v, the test expects %v", c.opts, ref, c.want)
		}
		const rows = 4000
		batch, keys := make([][]float32, rows), make([]uint32, rows)
		for r := range batch {
			batch[r], keys[r] = logits, uint32(r)*2654435761
		}
		toks, _ := drawOnDevice(t, batch, keys, c.opts, nil)
		seen := map[int]bool{}
		for _, tok := range toks {
			seen[int(tok)] = true
		}
		var got []int
		for v := range seen {
			got = append(got, v)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v: drew %v, want exactly %v", c.opts, got, c.want)
		}
	}
}

// Draws follow the truncated, renormalised distribution (so the hash noise is uniform enough);
// the log-prob is the tempered one.
func TestSampleGraph_Frequencies(t *testing.T) {
	logits := []float32{2, 1, 0, -1, -8}
	x := []float64{1, 0.5, 0, -0.5, -4} // logits / T
	lse := logSumExp(x)
	for _, c := range []struct {
		opts SampleOptions
		kept int // the first kept tokens are sampled
	}{{SampleOptions{Temperature: 2, TopK: 3}, 3}, {SampleOptions{Temperature: 2}, 5}, {SampleOptions{Temperature: 2, TopP: 0.6}, 2}, {SampleOptions{Temperature: 2, MinP: 0.5}, 2}} {
		keptZ := 0.0
		for i := range c.kept {
			keptZ += math.Exp(x[i])
		}
		const n = 50000
		batch, keys := make([][]float32, n), make([]uint32, n)
		for r := range batch {
			batch[r], keys[r] = logits, sampleKey(9, r, 0)
		}
		toks, lps := drawOnDevice(t, batch, keys, c.opts, nil)
		counts := make([]int, len(logits))
		for r, tok := range toks {
			counts[tok]++
			if math.Abs(float64(lps[r])-(x[tok]-lse)) > 1e-6 {
				t.Fatalf("%+v token %d: log-prob %v, want %v", c.opts, tok, lps[r], x[tok]-lse)
			}
		}
		for i, cnt := range counts {
			want := 0.0
			if i < c.kept {
				want = math.Exp(x[i]) / keptZ
			}
			// 4.5 standard errors of a frequency near ½ at n = 50,000.
			if got := float64(cnt) / n; math.Abs(got-want) > 0.01 {
				t.Errorf("%+v token %d: frequency %.4f, want %.4f", c.opts, i, got, want)
			}
		}
	}
}

func TestSampleKey_Independent(t *testing.T) {
	k := sampleKey(1, 0, 0)
	for _, other := range []uint32{sampleKey(1, 1, 0), sampleKey(2, 0, 0), sampleKey(1, 0, 1), sampleKey(0, 0, 0)} {
		if other == k {
			t.Errorf("key collision: %x", k)
		}
	}
	if sampleKey(1, 0, 0) != k {
		t.Error("sampleKey is not a function of its arguments")
	}
}

// The noise in the graph is bit-for-bit the reference's.
func TestUniformNoise_MatchesReference(t *testing.T) {
	keys := []uint32{0, 1, 0xdeadbeef, 0xffffffff}
	const vocab = 1000
	e, err := graph.NewExec(backend.SharedForTests(), func(k *graph.Node) *graph.Node { return uniformNoise(k, vocab) })
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	got := tensors.MustCopyFlatData[float32](e.MustExec(keys)[0])
	for r, key := range keys {
		for v := range vocab {
			if want := refUniform(key, v); float64(got[r*vocab+v]) != want || want <= 0 || want >= 1 {
				t.Fatalf("key %x token %d: u = %v, want %v in (0, 1)", key, v, got[r*vocab+v], want)
			}
		}
	}
}
