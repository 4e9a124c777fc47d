package generate_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// donationOptions are a greedy run and a sampled one with every warper and the repetition
// penalty (whose [B,V] seen mask travels with the caches).
var donationOptions = map[string]generate.Options{
	"greedy": {MaxNewTokens: 6, IgnoreEOS: true},
	"sampled": {MaxNewTokens: 6, IgnoreEOS: true, Seed: 7, SampleOptions: generate.SampleOptions{
		Temperature: 0.8, TopK: 20, TopP: 0.9, MinP: 0.01, RepetitionPenalty: 1.3}},
}

// requireSameGenerations fails unless a and b have the same tokens and bit-identical log-probs.
func requireSameGenerations(t *testing.T, what string, a, b []generate.Generation) {
	t.Helper()
	if !slices.EqualFunc(genIDs(a), genIDs(b), slices.Equal) {
		t.Fatalf("%s: tokens %v and %v differ", what, genIDs(a), genIDs(b))
	}
	for r := range a {
		for i := range a[r].LogProbs {
			if math.Float64bits(a[r].LogProbs[i]) != math.Float64bits(b[r].LogProbs[i]) {
				t.Fatalf("%s: row %d token %d: log-prob %v and %v differ", what, r, i, a[r].LogProbs[i], b[r].LogProbs[i])
			}
		}
	}
}

// Donating the KV cache changes no result: Generate gives the tokens and log-probs of the
// undonated path bit for bit, and a second Generate on the same Generator (its first decode step
// donating the prompt pass's caches again, through the already compiled graphs) gives them again.
func TestGenerate_DonatedCacheSameResults(t *testing.T) {
	g, _ := tinyGenerator(t)
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	for name, opts := range donationOptions {
		t.Run(name, func(t *testing.T) {
			kept, err := generate.GenerateKeepingCaches(g, prompts, opts)
			if err != nil {
				t.Fatal(err)
			}
			for call := 1; call <= 2; call++ {
				donated := mustGenerate(t, g, true, prompts, opts)
				requireSameGenerations(t, fmt.Sprintf("%s, call %d: donated vs kept caches", name, call), donated, kept)
			}
		})
	}
}

// On the pure-Go backend every decode step donates the previous step's caches (the first step the
// prompt pass's), the keys and values of every layer and the seen mask: the tensors are invalid
// before the step runs, not only freed after it. The run still gives Generate's results.
func TestGenerate_DecodeStepDonatesCaches(t *testing.T) {
	g, m := tinyGenerator(t)
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	opts := donationOptions["sampled"]
	want := mustGenerate(t, g, true, prompts, opts)
	steps, donated := 0, 0
	// Between donating the caches and running each step: every cache handed to the step has left
	// the stepper and is no longer a valid tensor.
	check := func(old []*tensors.Tensor, caches []any, held []*tensors.Tensor) {
		if len(old) == 0 {
			t.Fatal("no caches before a decode step")
		}
		for i, c := range old {
			if _, plain := caches[i].(*tensors.Tensor); plain || c.Ok() || held[i] != nil {
				t.Errorf("step %d cache %d: passed as a plain tensor %v, still valid %v, still held %v; want donated",
					steps, i, plain, c.Ok(), held[i] != nil)
			}
		}
		donated += len(old)
		steps++
	}
	got, err := generate.GenerateProbingDonation(g, prompts, opts, check)
	if err != nil {
		t.Fatal(err)
	}
	if steps != opts.MaxNewTokens-1 {
		t.Errorf("probe saw %d decode steps, want %d", steps, opts.MaxNewTokens-1)
	}
	if want := steps * (2*m.cfg.NumHiddenLayers + 1); donated != want {
		t.Errorf("%d caches donated over %d steps, want %d (keys and values of %d layers and the seen mask per step)",
			donated, steps, want, m.cfg.NumHiddenLayers)
	}
	requireSameGenerations(t, "probe vs Generate", got, want)
}

// On XLA the decode step writes each layer's new keys and values, and the seen mask, into the
// donated buffers of the old ones: XLA's memory plan of the step aliases every byte of the cache
// (greedy: exactly the cache; sampled with the repetition penalty: the cache and the seen mask),
// so no cache-sized buffer is allocated or copied per step. The results are Generate's, bit for
// bit, as TestGenerate_DonatedCacheSameResults checks.
func TestGenerate_DecodeCacheUpdatedInPlace(t *testing.T) {
	g, m := tinyGenerator(t)
	if backend.IsPureGo(m.backend) {
		t.Skip("XLA's memory plan; on the pure-Go backend TestGenerate_DecodeStepDonatesCaches checks the donation")
	}
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	for _, name := range []string{"greedy", "sampled"} {
		mustGenerate(t, g, true, prompts, donationOptions[name])
		st := g.Stats()
		if st.DecodeMemory == nil {
			t.Fatalf("%s: no memory plan for the decode step on %s", name, m.backend.Name())
		}
		cache := int64(2*m.cfg.NumHiddenLayers) * int64(st.Rows*st.CacheLen*m.cfg.NumKeyValueHeads*m.cfg.HeadDim) * 4
		got := st.DecodeMemory.Aliases
		switch {
		case name == "greedy" && got != cache:
			t.Errorf("greedy: %d bytes aliased, want the whole cache, %d (%+v)", got, cache, *st.DecodeMemory)
		case name == "sampled" && got <= cache:
			t.Errorf("sampled: %d bytes aliased, want the cache (%d) and the seen mask (%+v)", got, cache, *st.DecodeMemory)
		}
		t.Logf("%s: %+v (cache %d bytes)", name, *st.DecodeMemory, cache)
	}
}

// The cache starts one bucket past the prompt and doubles as the rows reach its end, the seen mask
// carried across: a 60-token generation grows it twice (32 → 64 → 128 slots after a 16-token
// prompt bucket) and draws the tokens of the uncached path, whose every step recomputes the whole
// sequence, with the same log-probs.
func TestGenerate_CacheGrowsWithTheRows(t *testing.T) {
	g, _ := tinyGenerator(t)
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	for name, opts := range donationOptions {
		opts.MaxNewTokens = 60
		cached := mustGenerate(t, g, true, prompts, opts)
		st := g.Stats()
		lens := generate.CacheLens(st.PromptLen, opts.MaxNewTokens)
		if final := generate.BucketLen(st.PromptLen + opts.MaxNewTokens); lens[len(lens)-1] != final || len(lens) < 3 ||
			st.CacheLen != final || st.CacheGrowths != len(lens)-1 {
			t.Errorf("%s: cache of %d slots after %d growths; CacheLens %v; want %d after at least 2 (prompt bucket %d)",
				name, st.CacheLen, st.CacheGrowths, lens, final, st.PromptLen)
		}
		uncached := mustGenerate(t, g, false, prompts, opts)
		if !slices.EqualFunc(genIDs(cached), genIDs(uncached), slices.Equal) {
			t.Fatalf("%s: cached %v, uncached %v", name, genIDs(cached), genIDs(uncached))
		}
		for r := range cached {
			for i := range cached[r].LogProbs {
				if d := math.Abs(cached[r].LogProbs[i] - uncached[r].LogProbs[i]); d > 1e-5 {
					t.Errorf("%s: row %d token %d: log-prob %v cached, %v uncached", name, r, i, cached[r].LogProbs[i], uncached[r].LogProbs[i])
				}
			}
		}
	}
}
