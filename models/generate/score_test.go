package generate_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

func onesMask(n int) []int32 {
	m := make([]int32, n)
	for i := range m {
		m[i] = 1
	}
	return m
}

// At T = 1 the generation's log-probs are Score's log-probs of the generated sequence (top-p
// truncation does not change them); at T ≠ 1 they are log softmax(logits/T) of Score's logits.
func TestGenerate_LogProbsMatchScore(t *testing.T) {
	g, m := tinyGenerator(t)
	cfg := m.cfg
	prompt := decoder.PromptsFromBatch(readInput(t, "single"))[0]
	for _, temp := range []float64{1, 2} {
		opts := generate.Options{MaxNewTokens: 6, IgnoreEOS: true, Seed: 11,
			SampleOptions: generate.SampleOptions{Temperature: temp, TopP: 0.9}}
		gen := mustGenerate(t, g, true, [][]int32{prompt}, opts)[0]
		for i, id := range gen.IDs {
			seq := append(slices.Clone(prompt), gen.IDs[:i+1]...)
			res := m.score(t, &decoder.Batch{IDs: [][]int32{seq[:len(seq)-1]}, Mask: [][]int32{onesMask(len(seq) - 1)}})
			x := make([]float64, cfg.VocabSize)
			for v, l := range res.LastLogits[0] {
				x[v] = float64(l) / temp
			}
			if want := x[id] - generate.LogSumExp(x); math.Abs(gen.LogProbs[i]-want) > 1e-5 {
				t.Errorf("T=%g token %d: log-prob %v, Score's logits give %v", temp, i, gen.LogProbs[i], want)
			}
		}
		if temp != 1 {
			continue
		}
		seq := append(slices.Clone(prompt), gen.IDs...)
		res := m.score(t, &decoder.Batch{IDs: [][]int32{seq}, Mask: [][]int32{onesMask(len(seq))}})
		for i, lp := range gen.LogProbs {
			if want := res.LogProbs[0][len(prompt)+i]; math.Abs(lp-want) > 1e-5 {
				t.Errorf("T=1 token %d: log-prob %v, Score %v", i, lp, want)
			}
		}
	}
}

// The KV cache update follows the backend. The pure-Go one has no DynamicUpdateSlice: Auto falls
// back to Where, and asking for the dynamic update is an error, not a crash. XLA has it: Auto
// picks it, and it generates the tokens and log-probs (within 1e-6) of the Where update.
func TestGenerate_KVUpdateFollowsTheBackend(t *testing.T) {
	g, m := tinyGenerator(t)
	prompts := [][]int32{{1, 2, 3}, {7, 40}}
	opts := generate.Options{MaxNewTokens: 5, IgnoreEOS: true}
	if !backend.IsPureGo(m.backend) {
		if got := generate.KVUpdateAuto.Resolve(m.backend); got != generate.KVUpdateDynamic {
			t.Errorf("Auto resolved to %v on %s, want KVUpdateDynamic", got, backend.ForTests())
		}
		g.KVUpdate = generate.KVUpdateDynamic
		dynamic, err := g.Generate(prompts, opts)
		if err != nil {
			t.Fatal(err)
		}
		w := m.generator(t)
		w.KVUpdate = generate.KVUpdateWhere
		where, err := w.Generate(prompts, opts)
		if err != nil {
			t.Fatal(err)
		}
		for r := range where {
			for i := range where[r].IDs {
				if dynamic[r].IDs[i] != where[r].IDs[i] || math.Abs(dynamic[r].LogProbs[i]-where[r].LogProbs[i]) > 1e-6 {
					t.Errorf("row %d token %d: dynamic update %d (%.7f), Where %d (%.7f)", r, i,
						dynamic[r].IDs[i], dynamic[r].LogProbs[i], where[r].IDs[i], where[r].LogProbs[i])
				}
			}
		}
		return
	}
	if got := generate.KVUpdateAuto.Resolve(m.backend); got != generate.KVUpdateWhere {
		t.Errorf("Auto resolved to %v on the go backend, want KVUpdateWhere", got)
	}
	g.KVUpdate = generate.KVUpdateDynamic
	_, err := g.Generate(prompts[:1], generate.Options{MaxNewTokens: 3, IgnoreEOS: true})
	if err == nil || !strings.Contains(err.Error(), "DynamicUpdateSlice") {
		t.Errorf("KVUpdateDynamic on the go backend: got %v, want an error naming DynamicUpdateSlice", err)
	}
}

func TestGenerate_Errors(t *testing.T) {
	g, _ := tinyGenerator(t)
	for _, c := range []struct {
		prompts [][]int32
		opts    generate.Options
		want    string
	}{
		{nil, generate.Options{MaxNewTokens: 1}, "no prompts"},
		{[][]int32{{1}}, generate.Options{}, "at least 1"},
		{[][]int32{{1}, {}}, generate.Options{MaxNewTokens: 1}, "prompt 1 is empty"},
		{[][]int32{{1, 1024}}, generate.Options{MaxNewTokens: 1}, "outside the vocabulary"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 40000}, "max_position_embeddings"},
		// 1 + MaxInt overflowed the context check, which passed; the cache allocation panicked.
		{[][]int32{{1, 2}}, generate.Options{MaxNewTokens: math.MaxInt}, "2 tokens + 9223372036854775807 new exceed max_position_embeddings"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: math.MaxInt - 1}, "max_position_embeddings"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{Temperature: 1, TopK: -1}}, "negative"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{Temperature: 1, MinP: 2}}, "min-p"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{RepetitionPenalty: -1}}, "repetition penalty"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{Temperature: math.NaN()}}, "temperature"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{Temperature: math.Inf(1)}}, "temperature"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{Temperature: -0.5}}, "temperature"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{Temperature: 1, TopP: math.NaN()}}, "top-p"},
		{[][]int32{{1}}, generate.Options{MaxNewTokens: 1, SampleOptions: generate.SampleOptions{Temperature: 1, MinP: math.NaN()}}, "min-p"},
	} {
		_, err := g.Generate(c.prompts, c.opts)
		if err == nil || !strings.HasPrefix(err.Error(), "qwen2 generate: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %+v: got %v, want a qwen2 generate error containing %q", c.prompts, c.opts, err, c.want)
		}
	}
}

// With a repetition penalty every greedy token is the argmax of Score's last logits after CTRL's
// penalty on the tokens of the prompt and of the generation so far (l/θ if l > 0, else l·θ), the
// reported log-probs stay those of the unpenalised distribution, the cached and uncached paths
// agree, and the fixture's repetitive greedy output changes.
func TestGenerate_RepetitionPenalty(t *testing.T) {
	g, m := tinyGenerator(t)
	cfg := m.cfg
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	const theta = 1.5
	opts := generate.Options{MaxNewTokens: 6, IgnoreEOS: true, SampleOptions: generate.SampleOptions{RepetitionPenalty: theta}}
	cached, uncached := mustGenerate(t, g, true, prompts, opts), mustGenerate(t, g, false, prompts, opts)
	if !slices.EqualFunc(genIDs(cached), genIDs(uncached), slices.Equal) {
		t.Errorf("cached %v, uncached %v", genIDs(cached), genIDs(uncached))
	}
	plain := mustGenerate(t, g, true, prompts, generate.Options{MaxNewTokens: 6, IgnoreEOS: true})
	if slices.EqualFunc(genIDs(cached), genIDs(plain), slices.Equal) {
		t.Errorf("the penalty changed nothing: %v", genIDs(plain))
	}
	for r, gen := range cached {
		for i, id := range gen.IDs {
			seq := append(slices.Clone(prompts[r]), gen.IDs[:i]...)
			res := m.score(t, &decoder.Batch{IDs: [][]int32{seq}, Mask: [][]int32{onesMask(len(seq))}})
			seen := map[int32]bool{}
			for _, s := range seq {
				seen[s] = true
			}
			x, best := make([]float64, cfg.VocabSize), 0
			for v, l := range res.LastLogits[0] {
				x[v] = float64(l)
				if penalised(res.LastLogits[0], v, seen, theta) > penalised(res.LastLogits[0], best, seen, theta) {
					best = v
				}
			}
			if int(id) != best {
				t.Errorf("row %d token %d: %d, the penalised argmax is %d", r, i, id, best)
			}
			if want := x[id] - generate.LogSumExp(x); math.Abs(gen.LogProbs[i]-want) > 1e-5 {
				t.Errorf("row %d token %d: log-prob %v, the unpenalised one is %v", r, i, gen.LogProbs[i], want)
			}
		}
	}
}

// penalised is logit v of l after CTRL's repetition penalty θ when v was seen.
func penalised(l []float32, v int, seen map[int32]bool, theta float32) float32 {
	if !seen[int32(v)] {
		return l[v]
	}
	if l[v] > 0 {
		return l[v] / theta
	}
	return l[v] * theta
}
