package decoder

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/generate"
)

// Scoring the prompts with their ragged generations gives back the generation's log-probs (T = 1)
// on exactly the generated tokens.
func TestCompletionBatch_ScoreGivesGenerationLogProbs(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	g := generate.NewGenerator(backend.SharedForTests(), ctx, Arch{Config: cfg})
	defer g.Finalize()
	prompts := PromptsFromBatch(readInput(t, "left_pad"))
	prompts = append(prompts, PromptsFromBatch(readInput(t, "single"))...)
	gens, err := g.Generate(prompts, generate.Options{MaxNewTokens: 6, StopIDs: []int{475}, // row 2 draws [8 8 475]
		Seed: 5, SampleOptions: generate.SampleOptions{Temperature: 1, TopK: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(gens[0].IDs) == len(gens[1].IDs) && len(gens[1].IDs) == len(gens[2].IDs) {
		t.Fatalf("want ragged generations to test the padding, got %v %v %v", gens[0].IDs, gens[1].IDs, gens[2].IDs)
	}
	batch, err := CompletionBatch(prompts, gens)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Score(backend.SharedForTests(), ctx, cfg, batch, false)
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report(batch)
	for r, gen := range gens {
		if len(rep.TokenIDs[r]) != len(gen.IDs) {
			t.Errorf("row %d: %d scored tokens %v, generated %v", r, len(rep.TokenIDs[r]), rep.TokenIDs[r], gen.IDs)
			continue
		}
		for i, lp := range gen.LogProbs {
			if rep.TokenIDs[r][i] != gen.IDs[i] || math.Abs(rep.TokenLogProbs[r][i]-lp) > 1e-5 {
				t.Errorf("row %d token %d: scored %d %v, generated %d %v", r, i, rep.TokenIDs[r][i], rep.TokenLogProbs[r][i], gen.IDs[i], lp)
			}
		}
	}
	if _, err := CompletionBatch(prompts[:1], gens); err == nil {
		t.Error("1 prompt, 3 generations: want an error")
	}
}
