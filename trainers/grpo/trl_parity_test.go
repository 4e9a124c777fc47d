package grpo_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/grpo"
)

// The GRPO golden of scripts/reference/trl_parity.py and the rollouts it replays in TRL.
const (
	grpoGolden   = "trainers/grpo/testdata/trl_parity/golden.json"
	grpoRollouts = "trainers/grpo/testdata/trl_parity/rollouts.json"
	// recordEnv, set to a tree's root, makes TestGRPO_TRLParity write the completions posttrain
	// samples to that tree's rollouts.json instead of comparing (the reference script's first
	// half: TRL then trains on exactly these).
	recordEnv = "POSTTRAIN_TRL_RECORD"
)

// generation is one generation batch posttrain sampled: the dataset rows of its prompts (each
// prompt once, in order; every prompt's num_generations completions are consecutive), and per
// completion the prompt's ids, the completion's ids (the stop token included when one ended it)
// and its text decoded without special tokens, which the reward functions see.
type generation struct {
	Rows          []int     `json:"rows"`
	PromptIDs     [][]int32 `json:"prompt_ids"`
	CompletionIDs [][]int32 `json:"completion_ids"`
	Texts         []string  `json:"texts"`
	// Masks are the completions' tool masks (1: the model's token, 0: a tool turn's) of a
	// multi-turn case; none otherwise.
	Masks [][]float32 `json:"masks,omitempty"`
}

// parityRewards are the reward functions of both sides (trl_parity.py's vowels and spaces): the
// number of ASCII vowels of a completion over 4, and on the rows of kind "spaces" only (NaN
// elsewhere: TRL's None) the number of spaces; reward_weights [1, 0.5] weigh them.
func parityRewards(weights []float64) []grpo.Reward {
	vowels := func(_, completions []string, _ map[string][]any) ([]float64, error) {
		out := make([]float64, len(completions))
		for i, c := range completions {
			for _, ch := range []byte(c) {
				if strings.IndexByte("aeiou", ch) >= 0 {
					out[i]++
				}
			}
			out[i] /= 4
		}
		return out, nil
	}
	spaces := func(_, completions []string, cols map[string][]any) ([]float64, error) {
		out := make([]float64, len(completions))
		for i, c := range completions {
			if cols["kind"][i] == "spaces" {
				out[i] = float64(strings.Count(c, " "))
			} else {
				out[i] = math.NaN()
			}
		}
		return out, nil
	}
	return []grpo.Reward{{Name: "vowels", Func: vowels, Weight: weights[0]}, {Name: "spaces", Func: spaces, Weight: weights[1]}}
}

// TRL 0.24.0's own GRPOTrainer (scripts/reference/trl_parity.py) and posttrain, on the same tiny
// checkpoint, prompts and options, with the completions fixed on both sides: the script replays
// the completions posttrain sampled (rollouts.json, which this test checks it samples again) in
// place of TRL's generation call, the prompts in posttrain's order (TRL's RepeatSampler layout),
// so everything after sampling is compared: rewards (two functions, one of them NaN on some rows,
// weighted), advantages under each scale_rewards, old and reference log-probs, each loss_type,
// token and sequence (GSPO) importance sampling, clipping with epsilon_high and delta, the
// entropy mask, mask_truncated_completions, more steps per generation than accumulation, and the
// metrics. 4 prompts × 4 generations a generation batch, micro-batches of 4, accumulation 2, 5
// steps; every key TRL logs at every step within 1e-5 relative (float32 on both sides; loss and
// kl measured against the size of the terms they are sums of, as they can cancel to 0).
//
// Differences by design, named and asserted: TRL shuffles a generation batch's completions before
// splitting it into micro-batches (shuffle_sequence_dict); posttrain keeps them in order, and the
// script turns the shuffle off (with several micro-batches per step, bnpo's token means and the
// per-micro-batch metrics depend on which rows share one). posttrain also logs what TRL logs only
// with vLLM or not at all: the sampler's log-prob difference to the training pass
// (sampling/sampling_logp_difference/*, which on these on-policy float32 runs must be small; the
// band metric 0), wall-clock timings and throughput.
func TestGRPO_TRLParity(t *testing.T) { replayParity(t, grpoGolden, grpoRollouts, nil) }

// TRL 1.16's GRPOTrainer (scripts/reference/trl1_parity.py, the pinned .venv-reference/trl-1)
// replaying posttrain's completions as TestGRPO_TRLParity does, for TRL 1.x's loss types: cispo
// (the capped, detached ratio on REINFORCE), sapo (the soft gate, with a reference), luspo
// (length-weighted sequence sums at the sequence level) and vespo (gamma weights of the
// sequence ratio), each off-policy (two updates per generation batch) so that the ratio moves
// and each loss's weighting of it shows; sapo's case with use_bias_correction_kl (TRL 1.x's
// default). Every key TRL logs at every step within 1e-5 relative, but the metrics whose
// definition TRL changed after 0.24, which posttrain logs as 0.24 does (trl1Differences).
func TestGRPO_TRL1Parity(t *testing.T) {
	replayParity(t, "trainers/grpo/testdata/trl1_parity/golden.json", "trainers/grpo/testdata/trl1_parity/rollouts.json", trl1Differences)
}

// trl1Differences are the GRPO metrics TRL 1.16 defines otherwise than TRL 0.24, whose
// definitions posttrain keeps (docs/training.md, "TRL 1.x"), each with the check that replaces the
// comparison:
//
//   - reward_std: TRL 1.x's std of the generation batch's rewards; 0.24's (posttrain's) is the
//     mean of the std each advantage was scaled by. Both ≥ 0.
//   - clip_ratio/low_min and high_max: TRL 1.x's min and max over sequences of each sequence's
//     clipped share; 0.24's are over processes (one here: the means). So TRL's low_min ≤
//     posttrain's and TRL's high_max ≥ posttrain's.
//   - rewards/NAME/mean and std of a step where the function scored nothing: TRL 1.x logs None
//     (read as 0 from its JSON), posttrain NaN as 0.24 does; otherwise compared.
func trl1Differences(diff looptest.Differences) {
	diff["reward_std"] = func(t testing.TB, step int, trl, got map[string]float64) {
		if !(got["reward_std"] >= 0) || !(trl["reward_std"] >= 0) {
			t.Errorf("step %d: reward_std %v (TRL %v)", step, got["reward_std"], trl["reward_std"])
		}
	}
	diff["clip_ratio/low_min"] = func(t testing.TB, step int, trl, got map[string]float64) {
		if trl["clip_ratio/low_min"] > got["clip_ratio/low_min"]+1e-6 {
			t.Errorf("step %d: TRL's clip_ratio/low_min %v > posttrain's %v", step, trl["clip_ratio/low_min"], got["clip_ratio/low_min"])
		}
	}
	diff["clip_ratio/high_max"] = func(t testing.TB, step int, trl, got map[string]float64) {
		if trl["clip_ratio/high_max"] < got["clip_ratio/high_max"]-1e-6 {
			t.Errorf("step %d: TRL's clip_ratio/high_max %v < posttrain's %v", step, trl["clip_ratio/high_max"], got["clip_ratio/high_max"])
		}
	}
	for _, k := range []string{"rewards/spaces/mean", "rewards/spaces/std"} {
		diff[k] = func(t testing.TB, step int, trl, got map[string]float64) {
			g, w := got[k], trl[k]
			if math.IsNaN(g) && w == 0 {
				return
			}
			if math.Abs(g-w) > 1e-5*math.Max(1, math.Abs(w)) {
				t.Errorf("step %d: %s = %v, TRL %v", step, k, g, w)
			}
		}
	}
}

// replayParity runs the cases of the golden at goldenPath and compares them with TRL's steps (the
// differences by design of compareGRPO, and those differences adds), or, with POSTTRAIN_TRL_RECORD
// set, records the completions posttrain samples at rolloutsPath.
func replayParity(t *testing.T, goldenPath, rolloutsPath string, differences func(looptest.Differences)) {
	root, record := os.LookupEnv(recordEnv)
	if !record {
		root = looptest.Root(t)
	}
	g := looptest.ReadTRLGoldenIn(t, root, goldenPath)
	recorded := map[string][]generation{}
	if !record {
		b, err := os.ReadFile(filepath.Join(root, rolloutsPath))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &recorded); err != nil {
			t.Fatalf("%s: %v", rolloutsPath, err)
		}
	}
	got := map[string][]generation{}
	for _, name := range slices.Sorted(maps.Keys(g.Cases)) {
		t.Run(name, func(t *testing.T) {
			cfg := grpo.DefaultConfig()
			c := g.Configure(t, name, cfg)
			cfg.Model, cfg.Dataset = g.ModelDir(t), filepath.Join(root, c.Rows)
			cfg.RewardFuncs = []string{"vowels", "spaces"} // parityRewards, TRL's reward_funcs
			cfg.Resolve()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			gens, absAdv, recs := trainParity(t, cfg, parityRewards(cfg.RewardWeights))
			got[name] = gens
			if record {
				return
			}
			want, ok := recorded[name]
			if !ok {
				t.Fatalf("%s has no case %s: regenerate with %s", rolloutsPath, name, g.Generator)
			}
			if !sameGenerations(t, want, gens) {
				t.Fatalf("posttrain no longer samples the completions TRL was given: regenerate with %s", g.Generator)
			}
			compareGRPO(t, name, c, recs, absAdv, cfg.Beta, differences)
		})
	}
	if record {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, rolloutsPath), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The same parity with the reward functions in Python: posttrain calls trl_parity.py's own reward
// file (testdata/trl_parity/rewards.py, which TRL's GRPOTrainer imported for the golden) through
// its worker, --reward-funcs FILE.py:FUNC, and matches TRL's metrics within the same bounds, the
// rewards of the spaces function's None rows included. Three of the cases, for time: the
// default loss, one with a reference model (beta) and one that generates once for several steps.
func TestGRPO_TRLParityPythonRewards(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("python3 is not on PATH")
		}
		t.Skip("python3 is not on PATH")
	}
	root := looptest.Root(t)
	g := looptest.ReadTRLGoldenIn(t, root, grpoGolden)
	py := filepath.Join(root, "trainers/grpo/testdata/trl_parity/rewards.py")
	for _, name := range []string{"dapo", "grpo_kl", "steps_per_generation"} {
		t.Run(name, func(t *testing.T) {
			cfg := grpo.DefaultConfig()
			c := g.Configure(t, name, cfg)
			cfg.Model, cfg.Dataset = g.ModelDir(t), filepath.Join(root, c.Rows)
			cfg.RewardFuncs = []string{py + ":vowels", py + ":spaces"}
			cfg.Resolve()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			_, fw, _ := grpo.SplitRewardWeights(cfg)
			rewards, err := grpo.LookupRewards(cfg.RewardFuncs, fw, uint64(cfg.Seed))
			if err != nil {
				t.Fatal(err)
			}
			rewards, ext, err := grpo.StartExternal(rewards, cfg, nil, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			defer ext.Close()
			if rewards[0].Name != "vowels" || rewards[1].Name != "spaces" || rewards[0].External == nil {
				t.Fatalf("rewards %+v", rewards)
			}
			_, absAdv, recs := trainParity(t, cfg, rewards)
			compareGRPO(t, name, c, recs, absAdv, cfg.Beta, nil)
		})
	}
}

// trainParity runs posttrain's GRPO as `posttrain grpo` does (grpo.Run) but with the parity
// rewards given, and returns the generation batches it sampled, the mean |advantage| of the batch each
// step trained on, and its metrics lines.
func trainParity(t *testing.T, cfg *grpo.Config, rewards []grpo.Reward, edit ...func(*trainable.Model, *grpo.Setup)) ([]generation, map[int]float64, []runlog.Record) {
	t.Helper()
	m, err := trainable.LoadForTraining(cfg.Model, cfg)
	if err != nil {
		t.Fatal(err)
	}
	setup := grpo.Setup{}
	for _, e := range edit { // before the prompts are rendered: a tool's schema goes in them
		e(m, &setup)
	}
	stop, err := m.Text.StopIDs(m.Config)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := rollout.LoadRows(cfg.Dataset, data.ReadOptions{}, "GRPO")
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := m.Text.Prompts(rows)
	if err != nil {
		t.Fatal(err)
	}
	index := map[*grpo.Prompt]int{}
	for i, p := range prompts {
		index[p] = i
	}
	var gens []generation
	var last *grpo.Scored
	absAdv := map[int]float64{}
	onStep := func(s grpo.StepInfo) {
		r := s.Scored
		for _, a := range r.Advantages {
			absAdv[s.Step] += math.Abs(a) / float64(len(r.Advantages))
		}
		if r == last {
			return
		}
		last = r
		var g generation
		for i, p := range r.Prompts {
			if i%cfg.NumGenerations == 0 {
				g.Rows = append(g.Rows, index[p])
			}
			g.PromptIDs = append(g.PromptIDs, p.IDs)
			g.CompletionIDs = append(g.CompletionIDs, r.Completions[i])
			g.Texts = append(g.Texts, r.Texts[i])
			if r.Tools {
				g.Masks = append(g.Masks, slices.Clone(r.Mask[i]))
			}
		}
		gens = append(gens, g)
	}
	setup.Config, setup.Backend, setup.Model, setup.Decoder = cfg, looptest.Backend(t), m, m.Text.Tokenizer
	setup.StopIDs, setup.Prompts, setup.Rewards, setup.OnStep = stop, prompts, rewards, onStep
	tr, err := grpo.New(setup)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(cfg.OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	return gens, absAdv, recs
}

// sameGenerations reports whether posttrain sampled the recorded generation batches again,
// saying where not.
func sameGenerations(t *testing.T, want, got []generation) bool {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("%d generation batches, recorded %d", len(got), len(want))
		return false
	}
	for i := range want {
		w, g := fmt.Sprint(want[i]), fmt.Sprint(got[i])
		if w != g {
			t.Errorf("generation batch %d:\n got %s\nwant %s", i+1, g, w)
			return false
		}
	}
	return true
}

// compareGRPO compares posttrain's metrics lines with TRL's steps (looptest.CompareTRL) with the
// GRPO differences by design.
func compareGRPO(t *testing.T, name string, c looptest.TRLCase, recs []runlog.Record, absAdv map[int]float64, beta float64,
	differences func(looptest.Differences)) {
	t.Helper()
	diff := looptest.Differences{}
	for _, k := range []string{"timing_s/generation", "timing_s/scoring", "timing_s/rewards", "timing_s/update",
		"tokens_per_s/generation", "tokens_per_s/update"} {
		diff[k] = func(t testing.TB, step int, _, got map[string]float64) {
			// Logged on the steps that generated (generation, scoring) or on every step (update).
			if v, ok := got[k]; ok && !(v >= 0) {
				t.Errorf("step %d: %s = %v", step, k, v)
			}
		}
	}
	worstSampling := 0.0
	diff[rl.SamplingDiffMean] = func(t testing.TB, step int, _, got map[string]float64) {
		worstSampling = math.Max(worstSampling, got[rl.SamplingDiffMax])
	}
	diff[rl.SamplingDiffMax] = func(t testing.TB, step int, _, got map[string]float64) {
		if v := got[rl.SamplingDiffMax]; !(v <= 1e-4) {
			t.Errorf("step %d: the sampler's log-probs differ from the training pass's by up to %.3g", step, v)
		}
	}
	diff[rl.SamplingOutside] = func(t testing.TB, step int, _, got map[string]float64) {
		if v := got[rl.SamplingOutside]; v != 0 {
			t.Errorf("step %d: %.3g of the tokens have a sampling ratio outside the band", step, v)
		}
	}
	if differences != nil { // last: a case's own rules replace the defaults above
		differences(diff)
	}
	scale := func(key string, trl map[string]float64) float64 {
		switch key {
		case "loss":
			// A sum of ±A·ρ terms whose advantages cancel within each group (to 0 at ρ = 1), plus
			// β·kl: against the mean |A| of the step's generation batch and β.
			return absAdv[int(trl["step"])] + beta
		case "kl":
			// A mean of exp(d) − d − 1 (d = log π_ref − log π), which cancels to 0 at d = 0: against
			// its constant term.
			return 1
		}
		return 0
	}
	looptest.CompareTRL(t, c, recs, 1e-5, scale, diff).Report(t, name)
	t.Logf("%s: sampler vs training pass log-probs: at most %.2g apart", name, worstSampling)
}
