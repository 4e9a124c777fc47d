package generate_test

import (
	"math"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// Greedy generation, cached and uncached, gives HF's tokens and log-probs on the fixtures.
func TestGenerate_GreedyMatchesHF(t *testing.T) {
	g, _ := tinyGenerator(t)
	for _, name := range []string{"left_pad", "single"} {
		t.Run(name, func(t *testing.T) {
			want := readExpectedGeneration(t, name)
			if !slices.EqualFunc(want.TokensCache, want.TokensNoCache, slices.Equal) {
				t.Fatalf("fixture: HF cached %v and uncached %v differ", want.TokensCache, want.TokensNoCache)
			}
			prompts := decoder.PromptsFromBatch(readInput(t, name))
			opts := generate.Options{MaxNewTokens: want.MaxNewTokens, IgnoreEOS: true}
			for _, cached := range []bool{true, false} {
				gens := mustGenerate(t, g, cached, prompts, opts)
				if got := genIDs(gens); !slices.EqualFunc(got, want.TokensCache, slices.Equal) {
					t.Errorf("cached=%v: got %v, want %v", cached, got, want.TokensCache)
				}
				for r, gen := range gens {
					if !gen.Truncated {
						t.Errorf("cached=%v row %d: not truncated with IgnoreEOS", cached, r)
					}
					for i, lp := range gen.LogProbs {
						if w := want.LogProbsCache[r][i]; math.Abs(lp-w) > 1e-4 {
							t.Errorf("cached=%v row %d token %d: log-prob %v, want %v", cached, r, i, lp, w)
						}
					}
				}
			}
		})
	}
}

// A row's greedy tokens do not depend on the other rows of the batch (left padding, extra rows).
func TestGenerate_PaddingInvariance(t *testing.T) {
	g, _ := tinyGenerator(t)
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	opts := generate.Options{MaxNewTokens: 6, IgnoreEOS: true}
	batch := mustGenerate(t, g, true, [][]int32{prompts[0], prompts[1], prompts[0][2:]}, opts)
	for r, p := range [][]int32{prompts[0], prompts[1], prompts[0][2:]} {
		alone := mustGenerate(t, g, true, [][]int32{p}, opts)[0]
		if !slices.Equal(alone.IDs, batch[r].IDs) {
			t.Errorf("row %d: alone %v, in a batch %v", r, alone.IDs, batch[r].IDs)
		}
		for i := range alone.LogProbs {
			if d := math.Abs(alone.LogProbs[i] - batch[r].LogProbs[i]); d > 1e-5 {
				t.Errorf("row %d token %d: log-prob differs by %g", r, i, d)
			}
		}
	}
}

// Rows stop at any of several stop ids, keep the stop token and are not truncated; others run on.
func TestGenerate_StopsAtEveryEOS(t *testing.T) {
	g, m := tinyGenerator(t)
	cfg := m.cfg
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad")) // greedy: [774 774 74 74 74], [184 ×5]
	for _, c := range []struct {
		name    string
		opts    generate.Options
		cfgEOS  []int
		want    [][]int32
		trunc   []bool
		cached  bool
		prompts [][]int32
	}{
		{"options", generate.Options{MaxNewTokens: 5, StopIDs: []int{1000, 74}}, nil,
			[][]int32{{774, 774, 74}, {184, 184, 184, 184, 184}}, []bool{false, true}, true, prompts},
		{"config list", generate.Options{MaxNewTokens: 5}, []int{1023, 184, 74},
			[][]int32{{774, 774, 74}, {184}}, []bool{false, false}, true, prompts},
		{"config uncached", generate.Options{MaxNewTokens: 5}, []int{184, 774},
			[][]int32{{774}, {184}}, []bool{false, false}, false, prompts},
		{"single", generate.Options{MaxNewTokens: 8, StopIDs: []int{475}}, nil,
			[][]int32{{8, 8, 8, 8, 8, 8, 475}}, []bool{false}, true, decoder.PromptsFromBatch(readInput(t, "single"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			saved := cfg.EOSTokenIDs
			defer func() { cfg.EOSTokenIDs = saved }()
			if c.cfgEOS != nil {
				cfg.EOSTokenIDs = c.cfgEOS
			}
			gens := mustGenerate(t, g, c.cached, c.prompts, c.opts)
			for r, gen := range gens {
				if !slices.Equal(gen.IDs, c.want[r]) || gen.Truncated != c.trunc[r] || len(gen.LogProbs) != len(gen.IDs) {
					t.Errorf("row %d: got %v truncated=%v (%d log-probs), want %v truncated=%v",
						r, gen.IDs, gen.Truncated, len(gen.LogProbs), c.want[r], c.trunc[r])
				}
			}
		})
	}
}

// A seed reproduces a sample exactly (cached or not, alone or in a batch); other seeds differ.
func TestGenerate_SamplingSeeded(t *testing.T) {
	g, _ := tinyGenerator(t)
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	opts := generate.Options{MaxNewTokens: 8, IgnoreEOS: true, Seed: 7,
		SampleOptions: generate.SampleOptions{Temperature: 1.5, TopP: 0.95, TopK: 50}}
	a := genIDs(mustGenerate(t, g, true, prompts, opts))
	b := genIDs(mustGenerate(t, g, true, prompts, opts))
	c := genIDs(mustGenerate(t, g, false, prompts, opts))
	alone := genIDs(mustGenerate(t, g, true, prompts[1:], opts))
	if !slices.EqualFunc(a, b, slices.Equal) || !slices.EqualFunc(a, c, slices.Equal) {
		t.Errorf("seed 7: %v, again %v, uncached %v", a, b, c)
	}
	opts.Seed = 8
	d := genIDs(mustGenerate(t, g, true, prompts, opts))
	if slices.EqualFunc(a, d, slices.Equal) {
		t.Errorf("seeds 7 and 8 gave the same tokens %v", a)
	}
	if slices.Equal(alone[0], a[1]) {
		t.Errorf("row 1 alone drew the same tokens as row 1 in the batch (%v): want row 0's stream", a[1])
	}
	opts.Seed = 7
	first := genIDs(mustGenerate(t, g, true, prompts[:1], opts))
	if !slices.Equal(first[0], a[0]) {
		t.Errorf("row 0 alone %v, in the batch %v: a row's draws must not depend on the batch", first[0], a[0])
	}
}

// Top-k = 1 is greedy at any temperature, and its log-probs are those of the tempered logits.
func TestGenerate_TopK1IsGreedy(t *testing.T) {
	g, _ := tinyGenerator(t)
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	greedy := mustGenerate(t, g, true, prompts, generate.Options{MaxNewTokens: 5, IgnoreEOS: true})
	top1 := mustGenerate(t, g, true, prompts, generate.Options{MaxNewTokens: 5, IgnoreEOS: true, Seed: 3,
		SampleOptions: generate.SampleOptions{Temperature: 0.7, TopK: 1}})
	if !slices.EqualFunc(genIDs(greedy), genIDs(top1), slices.Equal) {
		t.Errorf("top-k 1 %v, greedy %v", genIDs(top1), genIDs(greedy))
	}
	for r := range greedy {
		for i := range greedy[r].LogProbs {
			// Sharper distribution at T < 1: the argmax gets more mass.
			if top1[r].LogProbs[i] < greedy[r].LogProbs[i] {
				t.Errorf("row %d token %d: log-prob at T=0.7 %v below T=1's %v", r, i, top1[r].LogProbs[i], greedy[r].LogProbs[i])
			}
		}
	}
}

// Several decode steps per execution (Options.StepsPerCall) give the tokens and log-probs of one
// step per execution, bit for bit: greedy and sampled (top-k, top-p, repetition penalty), rows
// stopping within a call, the cache growing (from 16 slots to 64),
// and a tail shorter than a call, on both backends.
func TestGenerate_StepsPerCallEqualsSingleSteps(t *testing.T) {
	g, _ := tinyGenerator(t)
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad")) // greedy: [774 774 74 74 74], [184 ×5]
	for _, c := range []struct {
		name    string
		opts    generate.Options
		prompts [][]int32
	}{
		{"greedy, a row stops within a call", generate.Options{MaxNewTokens: 11, StopIDs: []int{74}}, prompts},
		{"sampled", generate.Options{MaxNewTokens: 10, IgnoreEOS: true, Seed: 5,
			SampleOptions: generate.SampleOptions{Temperature: 1.3, TopK: 40, TopP: 0.9, RepetitionPenalty: 1.2}}, prompts},
		{"cache growth", generate.Options{MaxNewTokens: 30, IgnoreEOS: true, Seed: 2,
			SampleOptions: generate.SampleOptions{Temperature: 1}}, prompts},
	} {
		t.Run(c.name, func(t *testing.T) {
			one := mustGenerate(t, g, true, c.prompts, c.opts)
			calls := g.Stats().DecodeCalls
			c.opts.StepsPerCall = 4
			four := mustGenerate(t, g, true, c.prompts, c.opts)
			st := g.Stats()
			for r := range one {
				if !slices.Equal(one[r].IDs, four[r].IDs) || !slices.Equal(one[r].LogProbs, four[r].LogProbs) || one[r].Truncated != four[r].Truncated {
					t.Errorf("row %d: 4 steps a call %v %v (truncated %v), one %v %v (truncated %v)", r,
						four[r].IDs, four[r].LogProbs, four[r].Truncated, one[r].IDs, one[r].LogProbs, one[r].Truncated)
				}
			}
			if c.name == "cache growth" && st.CacheGrowths == 0 {
				t.Errorf("the cache did not grow (%d slots)", st.CacheLen)
			}
			if st.DecodeSteps != calls || st.DecodeCalls >= calls || len(st.DecodeStepTimes) != st.DecodeSteps {
				t.Errorf("%d decode steps in %d calls (%d step times), against %d single steps", st.DecodeSteps, st.DecodeCalls, len(st.DecodeStepTimes), calls)
			}
		})
	}
}
