package grpo

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/extreward"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// rewardModelDir writes a reward model checkpoint (a tiny causal LM given a new score head and
// a pad token, saved as Qwen2ForSequenceClassification) into dir/name.
func rewardModelDir(t *testing.T, name string) string {
	t.Helper()
	m, _, err := trainable.LoadClassifier(looptest.Model(t), false, 1, 11)
	if err != nil {
		t.Fatal(err)
	}
	pad := 509 // tinymodel's <|endoftext|>
	m.Config.PadTokenID = &pad
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A reward model is one more weighted reward: it scores each prompt+completion as TRL's
// _calculate_rewards does (a conversational prompt with the completion as the assistant's message
// through the reward model's chat template; a plain prompt as prompt + completion, no special
// tokens, no EOS), in batches, under its directory's name (rewards/<name>/mean), mixed with the
// verifier rewards by reward_weights (models first).
func TestScoreRewards_RewardModel(t *testing.T) {
	dir := rewardModelDir(t, "rm")
	cfg := DefaultConfig()
	cfg.RewardModels, cfg.RewardFuncs, cfg.RewardWeights = []string{dir}, []string{"v"}, []float64{0.5, 2}
	mw, fw, _ := SplitRewardWeights(cfg)
	if !slices.Equal(mw, []float64{0.5}) || !slices.Equal(fw, []float64{2}) {
		t.Fatalf("SplitRewardWeights = %v, %v", mw, fw)
	}
	models, err := LoadRewardModels(looptest.Backend(t), []string{dir}, mw, false, 3)
	if err != nil {
		t.Fatal(err)
	}
	rewards := append(models, fixed("v", fw[0], 1, 0, 1, 0, 1))
	conv := data.Text{Messages: []chat.Message{{Role: "user", Content: "7×8?"}}}
	plain := data.Text{String: "Q: 7×8? A:"}
	r := &Scored{Texts: []string{"56", "54", " 56", " 54", "fifty-six"}, Rollout: rollout.Rollout{Completions: make([][]int32, 5)}}
	for _, src := range []data.Text{conv, conv, plain, plain, conv} {
		r.Prompts = append(r.Prompts, &Prompt{Source: src})
	}
	if err := scoreRewards(r, rewards, extreward.State{}); err != nil {
		t.Fatal(err)
	}
	txt := models[0].Scorer.Model.Text
	var rows [][]int32
	for i, p := range r.Prompts {
		var ids []int
		if p.Source.Conversational() {
			ids, _, err = txt.EncodeChat(append(slices.Clone(p.Source.Messages), chat.Message{Role: "assistant", Content: r.Texts[i]}), nil)
			if err != nil {
				t.Fatal(err)
			}
		} else {
			ids = txt.Tokenizer.Encode(p.Source.String + r.Texts[i])
		}
		row := make([]int32, len(ids))
		for j, id := range ids {
			row[j] = int32(id)
		}
		rows = append(rows, row)
	}
	if last := rows[2][len(rows[2])-1]; last == 511 {
		t.Errorf("a plain prompt+completion ends with the EOS: %v", rows[2])
	}
	want, err := models[0].Scorer.Score(rows)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.FuncRewards["rm"]; !slices.Equal(got, want) {
		t.Errorf("reward model rewards %v, want %v", got, want)
	}
	for i := range want {
		if w := 0.5*want[i] + 2*float64(1-i%2); math.Abs(r.Rewards[i]-w) > 1e-12 {
			t.Errorf("reward[%d] = %v, want 0.5·%v + 2·v = %v", i, r.Rewards[i], want[i], w)
		}
	}
	if err := advantages(r, 5, rl.ScaleGroup, "grpo"); err != nil {
		t.Fatal(err)
	}
	m := rewardMetrics(r, rewards)
	if got, w := m["rewards/rm/mean"], (want[0]+want[1]+want[2]+want[3]+want[4])/5; math.Abs(got-w) > 1e-12 {
		t.Errorf("rewards/rm/mean = %v, want %v", got, w)
	}
	if err := checkRewardNames(append(rewards, Reward{Name: "rm"})); err == nil || !strings.Contains(err.Error(), `"rm"`) {
		t.Errorf("two rewards named rm: %v", err)
	}
	if _, err := LoadRewardModels(looptest.Backend(t), []string{looptest.Model(t)}, nil, false, 3); err == nil || !strings.Contains(err.Error(), "causal LM") {
		t.Errorf("a causal LM as reward model: %v", err)
	}
}
