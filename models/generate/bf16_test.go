package generate_test

import (
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// With bfloat16 weights the cache holds bfloat16 keys and values; cached and uncached greedy
// generation still agree, and the tokens are those of the float32 model on the fixture.
func TestGenerate_BFloat16(t *testing.T) {
	g := loadTiny(t, dtypes.BFloat16).generator(t)
	want := readExpectedGeneration(t, "left_pad")
	prompts := decoder.PromptsFromBatch(readInput(t, "left_pad"))
	opts := generate.Options{MaxNewTokens: want.MaxNewTokens, IgnoreEOS: true}
	cached := genIDs(mustGenerate(t, g, true, prompts, opts))
	uncached := genIDs(mustGenerate(t, g, false, prompts, opts))
	if !slices.EqualFunc(cached, uncached, slices.Equal) || !slices.EqualFunc(cached, want.TokensCache, slices.Equal) {
		t.Errorf("bf16: cached %v, uncached %v; HF float32 %v", cached, uncached, want.TokensCache)
	}
}
