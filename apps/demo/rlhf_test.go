package demo

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Each problem's distinct wrong answers are split between training and held-out pairs, chosen is
// always the product, and no pair is in both sets.
func TestPreferencePairs_Split(t *testing.T) {
	ps := []mult.Problem{{A: 3, B: 4}, {A: 5, B: 5}}
	train, held := PreferencePairs(ps, 4, 1)
	if len(train) != 8 || len(held) != 2 { // 3×4 has 6 distinct wrong answers, 5×5 has 4
		t.Fatalf("%d training and %d held-out pairs, want 8 and 2", len(train), len(held))
	}
	seen := map[string]bool{}
	for _, r := range train {
		seen[r.Prompt.Messages[1].Content+"/"+r.Rejected.Messages[0].Content] = true
	}
	for _, r := range held {
		if seen[r.Prompt.Messages[1].Content+"/"+r.Rejected.Messages[0].Content] {
			t.Errorf("pair %+v is in both sets", r.Rejected)
		}
		if r.Prompt.Messages[1].Content != ps[0].Prompt() || r.Chosen.Messages[0].Content != "12" {
			t.Errorf("held-out pair %+v / %+v, want 3×4's with chosen 12", r.Prompt, r.Chosen)
		}
	}
	wrongs := map[string]bool{}
	for _, r := range append(train, held...) {
		if r.Prompt.Messages[1].Content == ps[0].Prompt() {
			wrongs[r.Rejected.Messages[0].Content] = true
		}
	}
	for _, w := range []string{"9", "8", "16", "15", "13", "11"} { // 12 + (-3, -4, 4, 3, 1, -1)
		if !wrongs[w] {
			t.Errorf("3×4: wrong answer %s missing (got %v)", w, wrongs)
		}
	}
	again, _ := PreferencePairs(ps, 4, 1)
	if again[0].Rejected.Messages[0].Content != train[0].Rejected.Messages[0].Content {
		t.Error("the same seed gave other pairs")
	}
}

// A miniature RLHF demo runs every stage end to end (SFT, reward model, GRPO and PPO with it, control)
// and leaves checkpoints that load; the learning itself is measured by `posttrain demo --rlhf`.
func TestRunRLHF_Miniature(t *testing.T) {
	o := DefaultRLHF
	o.Options = miniature(t, o.Options)
	o.RMSteps, o.RMBatch = 3, 4
	o.PPOUpdates, o.PPOPrompts, o.PPOEpochs = 2, 4, 2
	b := backend.MustNewForTests()
	rep, err := RunRLHF(stdctx.Background(), o, Env{Backend: b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range append(append([]Stage(nil), rep.Stages...), rep.RL...) {
		names = append(names, s.Name)
		if s.HeldOut.Strict.N != 3 || s.Train.Strict.N != 6 {
			t.Errorf("%s evaluated on %+v/%+v problems, want 3 held out and 6 trained", s.Name, s.HeldOut, s.Train)
		}
	}
	if got := strings.Join(names, "|"); got != "init (random weights)|SFT|GRPO reward model|PPO reward model|GRPO random (control)" {
		t.Errorf("stages %s", got)
	}
	// 6 GRPO problems (2..4)², two of them squares: 4·4 + 2·4 = 24 training pairs; 4·2 held out;
	// the 3 held-out problems' pairs all unseen.
	rm := rep.RewardModel
	if rm.Train.N != 4*6 || rm.HeldOutPairs.N != 2*4 || rm.Unseen.N < 3*4 || rm.Unseen.N > 3*6 {
		t.Errorf("reward model ranked %d/%d/%d pairs", rm.Train.N, rm.HeldOutPairs.N, rm.Unseen.N)
	}
	if rm.Dir != filepath.Join(o.OutputDir, RLHFDir, "reward-model") {
		t.Errorf("reward model in %s", rm.Dir)
	}
	cfg, err := decoder.ReadConfig(rm.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NumLabels != 1 {
		t.Errorf("reward model has %d labels, want 1", cfg.NumLabels)
	}
	if _, fresh, err := trainable.LoadClassifier(rm.Dir, false, 1, 0); err != nil || fresh {
		t.Errorf("reward model: fresh head %v, %v (want its trained score head)", fresh, err)
	}
	if _, err := trainable.LoadModel(filepath.Join(o.OutputDir, "sft"), false); err != nil {
		t.Errorf("SFT: %v", err)
	}
	if len(rep.RL) != 3 {
		t.Fatalf("%d RL rows, want 3", len(rep.RL))
	}
	for _, s := range rep.RL {
		if filepath.Dir(s.Dir) != filepath.Join(o.OutputDir, RLHFDir) {
			t.Errorf("%s in %s", s.Name, s.Dir)
		}
		if _, err := trainable.LoadModel(s.Dir, false); err != nil {
			t.Errorf("%s: %v", s.Name, err)
		}
		if _, err := os.Stat(filepath.Join(s.Dir, "metrics.jsonl")); err != nil {
			t.Error(err)
		}
	}
	m, err := os.ReadFile(filepath.Join(rep.RL[0].Dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(m), `"rewards/reward-model/mean"`) {
		t.Errorf("the reward-model GRPO run logged no rewards/reward-model/mean:\n%s", m)
	}
	if m, err = os.ReadFile(filepath.Join(rep.RL[1].Dir, "metrics.jsonl")); err != nil || !strings.Contains(string(m), `"objective/scores"`) {
		t.Errorf("the PPO run logged no objective/scores (%v):\n%s", err, m)
	}
	if _, fresh, err := trainable.LoadClassifier(filepath.Join(rep.RL[1].Dir, trainable.ValueDir), false, 1, 0); err != nil || fresh {
		t.Errorf("PPO's value model: fresh head %v, %v", fresh, err)
	}

	// Reusing the SFT and reward models runs only the stages asked for, in their order.
	weights := filepath.Join(rm.Dir, "model.safetensors")
	before, err := os.Stat(weights)
	if err != nil {
		t.Fatal(err)
	}
	o.ReuseSFT, o.ReuseRewardModel, o.Only = true, true, []string{"grpo-random", "ppo-reward-model"}
	again, err := RunRLHF(stdctx.Background(), o, Env{Backend: b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if after, err := os.Stat(weights); err != nil || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("--reuse-rm retrained the reward model (%v)", err)
	}
	if again.RewardModel.Unseen != rm.Unseen || len(again.RL) != 2 || again.RL[0].Name != "GRPO random (control)" || again.RL[1].Name != "PPO reward model" {
		t.Errorf("reused run: ranking %+v (first %+v), stages %+v", again.RewardModel.Unseen, rm.Unseen, again.RL)
	}
	o.Only = []string{"ppo"}
	if _, err := RunRLHF(stdctx.Background(), o, Env{Backend: b}, nil); err == nil || !strings.Contains(err.Error(), `no RL stage "ppo" (stages: grpo-reward-model, ppo-reward-model, grpo-random)`) {
		t.Errorf("unknown stage: %v", err)
	}
}
