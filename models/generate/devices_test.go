package generate_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend/devicetest"
	"github.com/posttrain/posttrain/internal/shard"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// Generation with its rows split over 2 and 4 of XLA's CPU devices (SplitRows) gives every row
// the tokens of the one-device run and its log-probs within 1e-5: greedy and sampled, with the
// repetition penalty's seen-token state, cached (the KV caches kept on their devices, donated
// piece by piece) and uncached, with batches that fill the bucket and batches that do not.
func TestGenerate_SplitRowsEqualsOneDevice(t *testing.T) {
	b := devicetest.DevicesBackend(t)
	cfg, err := decoder.ReadConfig(filepath.Join(tinyDir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	// A generator over a fresh copy of the weights for each device count: a variable keeps the
	// pieces of the first mesh that read it.
	generator := func(t *testing.T, devices int) *generate.Generator {
		ctx := context.New()
		if err := decoder.LoadWeights(ctx, cfg, filepath.Join(tinyDir, "model"), dtypes.Float32); err != nil {
			t.Fatal(err)
		}
		g := generate.NewGenerator(b, ctx, decoder.Arch{Config: cfg})
		t.Cleanup(g.Finalize)
		if devices > 1 {
			rows, err := shard.NewRows(b, devices)
			if err != nil {
				t.Fatal(err)
			}
			g.SplitRows(rows)
		}
		return g
	}
	prompts := [][]int32{{5, 17, 300, 42}, {9}, {100, 200, 300, 400, 500, 600, 7}, {1, 2}, {640, 3, 3}, {8, 80, 800}}
	cases := []struct {
		name    string
		prompts [][]int32
		opts    generate.Options
	}{
		{"greedy", prompts, generate.Options{MaxNewTokens: 7, IgnoreEOS: true}},
		{"sampled", prompts, generate.Options{MaxNewTokens: 9, Seed: 11, IgnoreEOS: true,
			SampleOptions: generate.SampleOptions{Temperature: 0.9, TopK: 50, TopP: 0.95, RepetitionPenalty: 1.3}}},
		{"three rows", prompts[:3], generate.Options{MaxNewTokens: 5, Seed: 3, IgnoreEOS: true,
			SampleOptions: generate.SampleOptions{Temperature: 1}}},
	}
	one := generator(t, 1)
	split := map[int]*generate.Generator{2: generator(t, 2), 4: generator(t, 4)}
	for _, c := range cases {
		for _, cached := range []bool{true, false} {
			want := mustGenerate(t, one, cached, c.prompts, c.opts)
			for _, n := range []int{2, 4} {
				got := mustGenerate(t, split[n], cached, c.prompts, c.opts)
				if st := split[n].Stats(); st.Rows%n != 0 {
					t.Errorf("%s, %d devices: batch bucket %d does not divide", c.name, n, st.Rows)
				}
				if !slices.EqualFunc(genIDs(got), genIDs(want), slices.Equal) {
					t.Errorf("%s cached=%v, %d devices: tokens %v, one device %v", c.name, cached, n, genIDs(got), genIDs(want))
					continue
				}
				worst := 0.0
				for r := range want {
					for i, lp := range want[r].LogProbs {
						worst = max(worst, math.Abs(got[r].LogProbs[i]-lp)/max(1, math.Abs(lp)))
					}
				}
				if worst > 1e-5 {
					t.Errorf("%s cached=%v, %d devices: log-probs differ by %.3g (relative)", c.name, cached, n, worst)
				} else {
					t.Logf("%s cached=%v, %d devices: log-probs within %.2g", c.name, cached, n, worst)
				}
			}
		}
	}
}
