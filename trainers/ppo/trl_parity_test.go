package ppo_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/ppo"
)

// The PPO golden of scripts/reference/trl_parity.py and the rollouts it replays in TRL.
const (
	ppoGolden   = "trainers/ppo/testdata/trl_parity/golden.json"
	ppoRollouts = "trainers/ppo/testdata/trl_parity/rollouts.json"
	// recordEnv, set to a tree's root, makes TestPPO_TRLParity write what posttrain samples to that
	// tree's rollouts.json instead of comparing (the reference script's first half).
	recordEnv = "POSTTRAIN_TRL_RECORD"
	// rewardModel is the reward and value models' checkpoint (the reward trainer's TRL parity model:
	// the tiny Qwen3 as Qwen3ForSequenceClassification).
	rewardModel = "trainers/reward/testdata/trl_parity/model"
)

// update is one PPO update's rollout as posttrain sampled it: the dataset rows of its queries,
// each query's ids (unpadded), each response's ids over the batch's generated width (pad_token_id after the
// generated ones), and each PPO epoch's permutation of the rows.
type update struct {
	Rows      []int     `json:"rows"`
	PromptIDs [][]int32 `json:"prompt_ids"`
	Responses [][]int32 `json:"responses"`
	Perms     [][]int   `json:"perms"`
}

// TRL 0.24.0's own PPOTrainer (scripts/reference/trl_parity.py) and posttrain, on the same tiny
// policy (the GRPO parity model, which stops some of its responses at <|im_end|>), reward and
// value model (the reward parity model), prompts and options, with the rollouts fixed on both
// sides: the script replays the responses posttrain sampled (rollouts.json, which this test
// checks it samples again) in place of TRL's batch_generation, the queries in posttrain's order
// and each PPO epoch's permutation of them, so everything after sampling is compared: truncation
// at the stop token, the reward model's scores and missing_eos_penalty, the policy, reference and
// value passes, k1 and k3 KL, reward whitening, GAE, advantage whitening, the clipped policy and
// value losses over PPO epochs and accumulation, and every metric TRL logs, at every update,
// within 1e-5 relative (float32 on both sides; posttrain's host-side rollout math is float64).
// Quantities that are sums of terms which cancel are measured against the size of those terms
// (each scale says which).
//
// Differences by design, asserted: TRL's generation logits are replaced by a forward pass over
// query + response in the script (posttrain's old log-probs come from one, docs/reward-ppo.md);
// eps (episodes per second) is wall-clock; posttrain also logs the sampler's log-probs against
// that forward pass (sampling/*). TRL's PPOTrainer never clips the gradients, and neither does
// posttrain's PPO by default (max_grad_norm 0; with TRL's nominal 1.0 the runs part from the
// first update's second PPO epoch on).
func TestPPO_TRLParity(t *testing.T) {
	root, record := os.LookupEnv(recordEnv)
	if !record {
		root = looptest.Root(t)
	}
	g := looptest.ReadTRLGoldenIn(t, root, ppoGolden)
	recorded := map[string][]update{}
	if !record {
		b, err := os.ReadFile(filepath.Join(root, ppoRollouts))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &recorded); err != nil {
			t.Fatalf("%s: %v", ppoRollouts, err)
		}
	}
	got := map[string][]update{}
	for _, name := range slices.Sorted(maps.Keys(g.Cases)) {
		t.Run(name, func(t *testing.T) {
			cfg := ppo.DefaultConfig()
			c := g.Configure(t, name, cfg)
			cfg.Model, cfg.Dataset = g.ModelDir(t), filepath.Join(root, c.Rows)
			rm := filepath.Join(t.TempDir(), "reward")
			if err := os.CopyFS(rm, os.DirFS(filepath.Join(root, rewardModel))); err != nil {
				t.Fatal(err)
			}
			if err := tinymodel.WriteTokenizer(rm); err != nil {
				t.Fatal(err)
			}
			cfg.RewardModelPath = rm
			cfg.Resolve()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ups, size, recs := trainParity(t, cfg)
			got[name] = ups
			if record {
				return
			}
			want, ok := recorded[name]
			if !ok {
				t.Fatalf("%s has no case %s: regenerate with %s", ppoRollouts, name, g.Generator)
			}
			if w, gt := fmt.Sprint(want), fmt.Sprint(ups); w != gt {
				t.Fatalf("posttrain no longer samples the rollouts TRL was given: regenerate with %s\n got %s\nwant %s", g.Generator, gt, w)
			}
			comparePPO(t, name, c, recs, cfg, size)
		})
	}
	if record {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, ppoRollouts), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sizes are the sizes of the terms an update's objective/* metrics sum: the mean over the
// rollout's rows of Σ_t |log π| (INVALID_LOGPROB's 1 past a row's end included: the terms
// objective/entropy sums) and of |score|.
type sizes struct{ logp, score float64 }

// trainParity runs `posttrain ppo` (ppo.Run) and returns the updates it sampled, each update's
// sizes and its metrics lines.
func trainParity(t *testing.T, cfg *ppo.Config) ([]update, map[int]sizes, []runlog.Record) {
	t.Helper()
	var ups []update
	size := map[int]sizes{}
	index := map[*ppo.Prompt]int{}
	onUpdate := func(u ppo.UpdateInfo) {
		r := u.Scored
		if len(index) == 0 {
			t.Fatal("the prompts were not indexed")
		}
		var up update
		for i, p := range r.Prompts {
			up.Rows = append(up.Rows, index[p])
			up.PromptIDs = append(up.PromptIDs, p.IDs)
			up.Responses = append(up.Responses, r.Responses[i][:r.Width])
		}
		up.Perms = u.Perms
		var sz sizes
		for i, row := range r.LogProbs {
			for _, lp := range row[:r.Width] {
				sz.logp += math.Abs(lp) / float64(r.Len())
			}
			sz.score += math.Abs(r.Scores[i]) / float64(r.Len())
		}
		size[u.Update] = sz
		ups = append(ups, up)
	}
	tr, err := ppo.Load(stdctx.Background(), cfg, cfg.Model, ppo.RunOptions{Env: loop.Env{Backend: looptest.Backend(t)}, OnUpdate: onUpdate})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range tr.Prompts() {
		index[p] = i
	}
	if _, err := tr.Train(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(cfg.OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	return ups, size, recs
}

// comparePPO compares posttrain's metrics lines with TRL's updates with PPO's differences by design.
func comparePPO(t *testing.T, name string, c looptest.TRLCase, recs []runlog.Record, cfg *ppo.Config, size map[int]sizes) {
	t.Helper()
	present := func(k string) func(t testing.TB, step int, _, got map[string]float64) {
		return func(t testing.TB, step int, _, got map[string]float64) {
			if v, ok := got[k]; !ok || !(v >= 0) {
				t.Errorf("update %d: %s = %v, want a number ≥ 0", step, k, v)
			}
		}
	}
	diff := looptest.Differences{
		"eps": present("eps"),
		// TRL's PPO lines have lr (compared), no loss, grad_norm or learning_rate; nor posttrain's.
		"loss": nil, "grad_norm": nil, "learning_rate": nil,
		rl.SamplingOutside:  nil,
		rl.SamplingDiffMean: nil,
		rl.SamplingDiffMax:  nil,
	}
	worstSampling := 0.0
	for _, k := range []string{rl.SamplingDiffMean, rl.SamplingDiffMax} {
		diff[k] = func(t testing.TB, step int, _, got map[string]float64) {
			worstSampling = math.Max(worstSampling, got[rl.SamplingDiffMax])
			if v := got[rl.SamplingDiffMax]; !(v <= 1e-4) {
				t.Errorf("update %d: the sampler's log-probs differ from the rollout's forward pass by up to %.3g", step, v)
			}
		}
	}
	diff[rl.SamplingOutside] = func(t testing.TB, step int, _, got map[string]float64) {
		if v := got[rl.SamplingOutside]; v != 0 {
			t.Errorf("update %d: %.3g of the tokens have a sampling ratio outside the band", step, v)
		}
	}
	scale := func(key string, trl map[string]float64) float64 {
		// objective/entropy sums −log π over the response, INVALID_LOGPROB's −1 past each row's end
		// included, so it cancels; objective/kl sums log π − log π_ref (k1, either sign) or its k3
		// form: both against Σ|log π|, non_score_reward (−kl_coef·kl) against kl_coef times that;
		// objective/scores is a mean of scores of both signs: against the mean |score|;
		// rlhf_reward (non_score_reward + the scores) against both.
		sz := size[int(trl["step"])]
		switch key {
		case "objective/entropy", "objective/kl":
			return sz.logp
		case "objective/non_score_reward":
			return cfg.KLCoef * sz.logp
		case "objective/scores":
			return sz.score
		case "objective/rlhf_reward":
			return cfg.KLCoef*sz.logp + sz.score
		case "loss/policy_avg", "policy/approxkl_avg", "val/ratio_var":
			// −A·ρ with whitened advantages (mean 0, std 1) cancels to about 0; ½·mean(Δ²) and the
			// ratios' variance start at 0: against 1, the advantages' and ratios' size.
			return 1
		}
		return 0
	}
	looptest.CompareTRL(t, c, recs, 1e-5, scale, diff).Report(t, name)
	t.Logf("%s: sampler vs rollout forward pass log-probs: at most %.2g apart", name, worstSampling)
}
