package tinylm

import (
	"fmt"
	"math"
	"sort"

	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

// Preference is one human comparison: for Prompt, Chosen (y_w) is better than Rejected (y_l).
// Responses are written as Show writes them ("12⏎").
type Preference struct{ Prompt, Chosen, Rejected string }

// Preferences is the course's PREFERENCES (phases 9 and 10).
var Preferences = []Preference{
	{"3×4=", "12⏎", "7⏎"},
	{"3×4=", "12⏎", "1⏎"},
	{"3×4=", "1⏎", "7⏎"}, // "1" is wrong but is the answer's first digit, so better than "7"
	{"2×3=", "6⏎", "7⏎"},
	{"2×3=", "6⏎", "1⏎"},
}

// RMScore is one reward-model entry.
type RMScore struct {
	Prompt, Response string
	Score            float64
}

// RewardModel is the course's table reward model: one score per (prompt, response), 0 if unseen.
type RewardModel struct {
	entries []RMScore // insertion order
	idx     map[[2]string]int
}

// Score is r(x, y); responses never seen in training score 0 (also truncated ones like "127").
func (rm *RewardModel) Score(prompt, response string) float64 {
	if i, ok := rm.idx[[2]string{prompt, response}]; ok {
		return rm.entries[i].Score
	}
	return 0.0
}

func (rm *RewardModel) set(prompt, response string, v float64) {
	k := [2]string{prompt, response}
	if i, ok := rm.idx[k]; ok {
		rm.entries[i].Score = v
		return
	}
	rm.idx[k] = len(rm.entries)
	rm.entries = append(rm.entries, RMScore{prompt, response, v})
}

// Entries returns the scores in insertion order.
func (rm *RewardModel) Entries() []RMScore { return append([]RMScore(nil), rm.entries...) }

// Sorted returns the scores keyed prompt+response, by descending score (ties in insertion order),
// as phase 9 prints them.
func (rm *RewardModel) Sorted() Scores {
	e := rm.Entries()
	sort.SliceStable(e, func(i, j int) bool { return e[i].Score > e[j].Score })
	out := make(Scores, len(e))
	for i, s := range e {
		out[i] = Score{s.Prompt + s.Response, s.Score}
	}
	return out
}

// TrainRewardModel fits a Bradley–Terry table (식 (9.1)–(9.2)): P(y_w ≻ y_l) = σ(r_w − r_l),
// L = −log σ(r_w − r_l), so one SGD step moves r_w up and r_l down by lr·(1 − σ(r_w − r_l)).
func TrainRewardModel(prefs []Preference, epochs int, lr float64) *RewardModel {
	rm := &RewardModel{idx: map[[2]string]int{}}
	for range epochs {
		for _, p := range prefs {
			rw, rl := rm.Score(p.Prompt, p.Chosen), rm.Score(p.Prompt, p.Rejected)
			g := 1 - Sigmoid(rw-rl) // −∂L/∂r_w = ∂L/∂r_l
			rm.set(p.Prompt, p.Chosen, rw+float64(lr*g))
			rm.set(p.Prompt, p.Rejected, rl-float64(lr*g))
		}
	}
	return rm
}

// RLHFConfig is phase 9: the reward model's training and rlhf_ppo's settings.
type RLHFConfig struct {
	RMEpochs int     // 200
	RMLR     float64 // 0.5
	Beta     float64 // per-token KL penalty β of 식 (9.3), 0.1
	// Iterations of rollout + PPO; Group samples per prompt; Epochs PPO passes over each batch.
	Iterations, Group, Epochs int     // 80, 16, 4
	LR, CriticLR              float64 // 0.5, 0.2
	Eps, Lam                  float64 // PPO clip ε 0.2, GAE λ 0.95 (γ = 1)
	Seed                      int64
}

// DefaultRLHF returns the course's defaults.
func DefaultRLHF() RLHFConfig {
	return RLHFConfig{RMEpochs: 200, RMLR: 0.5, Beta: 0.1, Iterations: 80, Group: 16, Epochs: 4,
		LR: 0.5, CriticLR: 0.2, Eps: 0.2, Lam: 0.95, Seed: 0}
}

// Validate rejects non-positive sizes and rates.
func (c RLHFConfig) Validate() error {
	if c.RMEpochs <= 0 || c.RMLR <= 0 || c.Iterations <= 0 || c.Group <= 0 || c.Epochs <= 0 ||
		c.LR <= 0 || c.CriticLR <= 0 || c.Eps <= 0 {
		return fmt.Errorf("rlhf: %w", errPositive)
	}
	return nil
}

// Rollout is one sampled response of rlhf_ppo with what PPO and the critic need.
type Rollout struct {
	Prompt    string
	Tokens    []int
	Rewards   []float64 // per token: −β(log π_old − log π_ref), plus r(x,y) on the last (식 (9.3))
	Old, Adv  []float64 // log π_old per token, GAE advantage per token
	Returns   []float64 // critic targets Adv + V
	ValueKeys []Key     // critic keys: the prefix before each token
}

// RLHFPPO is the course's rlhf_ppo: per-token reward −β(log π_old − log π_ref), plus r(x,y) on
// the last token (식 (9.3)); a table critic V(prefix); GAE with γ = 1 (식 (6.2)); and Epochs
// PPO-clip passes (식 (7.2)) over each batch, each token weighted 1/(tokens in the batch).
func RLHFPPO(rm *RewardModel, cfg RLHFConfig) (lm, ref *TinyLM, head []Sample) {
	rng := pyrand.New(cfg.Seed)
	lm = New()
	ref = lm.Copy()
	values := map[Key]float64{}
	var tr tracer
	for range cfg.Iterations {
		var batch []Rollout
		for _, x := range Prompts {
			for range cfg.Group {
				y := lm.Sample(x, rng)
				tr.record(x, y)
				batch = append(batch, NewRollout(lm, ref, rm, values, x, y, cfg))
			}
		}
		nTokens := 0
		for _, b := range batch {
			nTokens += len(b.Tokens)
		}
		for range cfg.Epochs {
			grads := NewGrads()
			for _, b := range batch {
				newLogps := lm.TokenLogps(b.Prompt, b.Tokens)
				for t := range b.Tokens {
					_, coef := rl.PPOClipTerm(math.Exp(newLogps[t]-b.Old[t]), b.Adv[t], cfg.Eps)
					k, g := lm.GradToken(b.Prompt, b.Tokens, t)
					grads.Add(k, g, coef/float64(nTokens))
				}
			}
			lm.Apply(grads, cfg.LR)
		}
		for _, b := range batch { // critic: V(prefix) moves toward its return
			for t, k := range b.ValueKeys {
				values[k] += float64(cfg.CriticLR * (b.Returns[t] - values[k]))
			}
		}
	}
	return lm, ref, tr.head
}

// NewRollout scores response y of prompt x: token rewards (식 (9.3)) with cfg.Beta, the critic's
// values (0 for unseen prefixes) and GAE advantages with cfg.Lam (γ = 1, the value after the last
// token is 0).
func NewRollout(lm, ref *TinyLM, rm *RewardModel, values map[Key]float64, x string, y []int,
	cfg RLHFConfig) Rollout {
	old := lm.TokenLogps(x, y)
	refl := ref.TokenLogps(x, y)
	n := len(y)
	rewards := make([]float64, n)
	for t := range y {
		rewards[t] = -cfg.Beta * rl.TokenKL(old[t], refl[t], rl.KLK1) // k1 = old − ref
	}
	rewards[n-1] += rm.Score(x, Show(y))
	r := Rollout{Prompt: x, Tokens: y, Rewards: rewards, Old: old}
	vals := make([]float64, n)
	for t := range y {
		r.ValueKeys = append(r.ValueKeys, prefixKey(x, y[:t]))
		vals[t] = values[r.ValueKeys[t]]
	}
	// γ = 1: A_t = (r_t + V_{t+1} − V_t) + λ·A_{t+1}, the same float operations as the course.
	_, r.Adv, r.Returns = rl.GAE(rewards, vals, 0, true, 1, cfg.Lam)
	return r
}

// RLHFOptimum is π*(y) ∝ π_ref(y)·exp(r(y)/β) over every response of prompt (식 (8.5) with the
// reward model), keyed by the shown response in AllResponses order.
func RLHFOptimum(rm *RewardModel, prompt string, beta float64) Scores {
	var w Scores
	for _, r := range AllResponses(New(), prompt) {
		y := Show(r.Tokens)
		w = append(w, Score{y, r.Prob * math.Exp(rm.Score(prompt, y)/beta)})
	}
	z := 0.0
	for _, s := range w {
		z += s.Value
	}
	for i := range w {
		w[i].Value /= z
	}
	return w
}

// Phase9Result is everything phase 9 computes (the golden's keys).
type Phase9Result struct {
	RewardModel Scores        `json:"reward_model"` // sorted by descending score
	Results     PromptResults `json:"results"`      // with Optimum set
	Logits      Logits        `json:"logits"`
	SamplesHead []Sample      `json:"samples_head"`
}

// RunRLHF trains the reward model on Preferences, runs RLHFPPO and scores the result, including
// the optimum's P(answer⏎) at the same β.
func RunRLHF(cfg RLHFConfig) Phase9Result {
	rm := TrainRewardModel(Preferences, cfg.RMEpochs, cfg.RMLR)
	lm, ref, head := RLHFPPO(rm, cfg)
	return NewRLHFResult(rm, cfg.Beta, lm, ref, head)
}

// NewRLHFResult scores a model trained against rm with KL coefficient beta: per prompt P(answer)
// under ref and lm, the optimum's P(answer⏎) (RLHFOptimum) and the KL.
func NewRLHFResult(rm *RewardModel, beta float64, lm, ref *TinyLM, head []Sample) Phase9Result {
	res := Phase9Result{RewardModel: rm.Sorted(), SamplesHead: head}
	for _, x := range Prompts {
		pr := PromptResult{Prompt: x, PRef: PCorrect(ref, x), PCorrect: PCorrect(lm, x)}
		opt, _ := RLHFOptimum(rm, x, beta).Get(Answers[x] + eosMark)
		pr.Optimum = &opt
		pr.KL = KL(lm, ref, x)
		res.Results = append(res.Results, pr)
	}
	res.Logits = lm.Logits()
	return res
}
