package grpo

import (
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"strings"
	"time"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/extreward"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Reward is one named verifier reward function with its weight (TRL reward_funcs, reward_weights).
type Reward struct {
	Name   string
	Func   data.RewardFunc
	Weight float64
	// Random is set for the "random" reward: the run's draw stream, whose call count checkpoints
	// save (NewRandomReward).
	Random *RandomReward
	// Scorer is set for a reward model (Func is then nil): it scores prompt+completion
	// (scoreWithModel).
	Scorer *trainable.Scorer
	// External is set for a Python function or a reward server (Func is then nil): it is called
	// with TRL's arguments (scoreExternal). Python, the spec FILE.py:FUNC or module.func, is set
	// from LookupRewards on; StartExternal starts the worker and sets External and the Name.
	External *extreward.Func
	Python   string
}

// LookupRewards makes a run's reward functions from data's registry, seeded with the run's seed
// (a reward with state gets its own instance; every "random" of the list shares one stream, as
// they share the run); weights nil means all 1.
func LookupRewards(names []string, weights []float64, seed uint64) ([]Reward, error) {
	if len(weights) > 0 && len(weights) != len(names) {
		return nil, fmt.Errorf("grpo: %d reward weights for %d reward functions", len(weights), len(names))
	}
	out := make([]Reward, len(names))
	var random *RandomReward
	patterns := map[string]int{} // regex: and len: rewards so far, for their logged names
	for i, name := range names {
		w := 1.0
		if len(weights) > 0 {
			w = weights[i]
		}
		if extreward.IsPythonSpec(name) {
			if file, _, ok := strings.Cut(name, ".py:"); ok {
				if _, err := os.Stat(file + ".py"); err != nil {
					return nil, fmt.Errorf("grpo: reward_funcs %s: %w", name, err)
				}
			}
			out[i] = Reward{Name: name, Weight: w, Python: name}
			continue
		}
		if f := extreward.TRLReward(name); f != nil {
			out[i] = Reward{Name: name, Weight: w, External: f}
			continue
		}
		if kind, _, ok := strings.Cut(name, ":"); ok && (kind == "regex" || kind == "len") {
			patterns[kind]++
			logged := kind
			if patterns[kind] > 1 {
				logged = fmt.Sprintf("%s_%d", kind, patterns[kind])
			}
			f, err := extreward.PatternReward(name, logged)
			if err != nil {
				return nil, fmt.Errorf("grpo: %w", err)
			}
			out[i] = Reward{Name: logged, Weight: w, External: f}
			continue
		}
		if strings.HasSuffix(name, ".py") {
			return nil, fmt.Errorf("grpo: reward_funcs %s: name the function too, %s:FUNC", name, name)
		}
		if name == RandomRewardName {
			if random == nil {
				random = &RandomReward{Seed: seed}
			}
			out[i] = Reward{Name: name, Func: random.Score, Weight: w, Random: random}
			continue
		}
		f, err := data.NewReward(name, seed)
		if err != nil {
			return nil, fmt.Errorf("grpo: %w", err)
		}
		out[i] = Reward{Name: name, Func: f, Weight: w}
	}
	return out, nil
}

// External holds a run's external rewards' resources: the Python worker, if any.
type External struct{ worker *extreward.Worker }

// Close stops the Python worker.
func (e *External) Close() error {
	if e == nil || e.worker == nil {
		return nil
	}
	return e.worker.Close()
}

// StartExternal starts one Python worker for every Python function of rewards (loading their
// files; each is then named by its __name__, as TRL logs it) and appends a reward for each of
// cfg's reward servers, with urlWeights (nil: 1). Close the External when the run ends.
func StartExternal(rewards []Reward, cfg *Config, urlWeights []float64, stderr io.Writer) ([]Reward, *External, error) {
	timeout := time.Duration(cfg.RewardTimeout * float64(time.Second))
	var specs []string
	var at []int
	for i, r := range rewards {
		if r.Python != "" {
			specs, at = append(specs, r.Python), append(at, i)
		}
	}
	ext := &External{}
	if len(specs) > 0 {
		w, funcs, err := extreward.Start(cfg.RewardPython, specs, stderr, timeout)
		if err != nil {
			return nil, nil, fmt.Errorf("grpo: %w", err)
		}
		ext.worker = w
		for k, i := range at {
			rewards[i].External, rewards[i].Name = funcs[k], funcs[k].Name
		}
	}
	for k, u := range cfg.RewardURLs {
		f, err := extreward.NewURL(u, timeout)
		if err != nil {
			ext.Close()
			return nil, nil, fmt.Errorf("grpo: %w", err)
		}
		w := 1.0
		if len(urlWeights) > 0 {
			w = urlWeights[k]
		}
		rewards = append(rewards, Reward{Name: f.Name, Weight: w, External: f})
	}
	return rewards, ext, nil
}

// CheckRewards runs every reward function without state (reward models aside) once per prompt of a dataset, on an empty
// completion, before anything is generated: a column a reward cannot read (an "answer" of the
// wrong type) is then an error naming the file and line at load time, not one after the first
// generation. Rewards with state (the random stream) are not called, so the run's draws are
// unchanged.
func CheckRewards(dataset string, prompts []*Prompt, rewards []Reward, st extreward.State) error {
	for _, rw := range rewards {
		if rw.External != nil {
			if err := checkExternal(dataset, prompts, rw, st); err != nil {
				return err
			}
			continue
		}
		if rw.Random != nil || rw.Scorer != nil {
			continue
		}
		for i, p := range prompts {
			cols := data.Columns([]data.Row{{Columns: p.Columns}})
			if _, err := rw.Func([]string{p.Text}, []string{""}, cols); err != nil {
				where := fmt.Sprintf("%s: row %d", dataset, i+1)
				if p.Line > 0 {
					where = fmt.Sprintf("%s:%d", dataset, p.Line)
				}
				return fmt.Errorf("%s: reward %s: %w", where, rw.Name, err)
			}
		}
	}
	return nil
}

// checkRows is how many prompts an external reward's check call holds.
const checkRows = 16

// checkExternal calls an external reward once before anything is generated, on the first
// checkRows prompts with empty completions, so that a function that cannot read the dataset's
// columns (a KeyError) stops the run at load time.
func checkExternal(dataset string, prompts []*Prompt, rw Reward, st extreward.State) error {
	k := min(len(prompts), checkRows)
	r := &Scored{Texts: make([]string, k)}
	r.Prompts, r.Completions = prompts[:k], make([][]int32, k)
	for i := range k {
		r.Completions[i] = []int32{}
	}
	if _, err := rw.External.Score(externalCall(r, st)); err != nil {
		return fmt.Errorf("%s: reward %s (%s), called before training on the first %d prompts with empty completions: %w", dataset, rw.Name, rw.External.Spec, k, err)
	}
	return nil
}

// externalCall is the arguments TRL's GRPOTrainer passes a reward function for the rollout r
// (grpo_trainer.py _generate_and_score_completions): the prompts as the dataset gives them, the
// completions' texts (an assistant message each for conversational prompts), their token ids,
// the dataset's other columns and the trainer's state.
func externalCall(r *Scored, st extreward.State) extreward.Call {
	n := r.Len()
	c := extreward.Call{State: st, Prompts: make([]any, n), Completions: make([]any, n), CompletionIDs: r.Completions, Query: make([]string, n)}
	rows := make([]data.Row, n)
	for i, p := range r.Prompts {
		switch {
		case r.Conversations != nil: // a multi-turn completion: its turns (TRL 1.x's tool loop)
			c.Prompts[i], c.Completions[i] = p.Source.Messages, r.Conversations[i]
		case p.Source.Conversational():
			c.Prompts[i], c.Completions[i] = extreward.ConversationalCompletion(p.Source.Messages, r.Texts[i])
		default:
			c.Prompts[i], c.Completions[i] = p.Source.String, r.Texts[i]
		}
		c.Query[i] = p.Text + r.Texts[i]
		rows[i].Columns = p.Columns
	}
	c.Columns = data.Columns(rows)
	return c
}

// randomStream is the run's "random" reward stream among rewards, or nil.
func randomStream(rewards []Reward) *RandomReward {
	for _, r := range rewards {
		if r.Random != nil {
			return r.Random
		}
	}
	return nil
}

// scoreRewards runs every reward function over the rollout's completion texts, the prompts' texts
// and the dataset columns (a reward model over the prompts and completions, scoreWithModel), and
// sums them as TRL does (grpo_trainer.py L1018-1050):
//
//	r_i = nansum_k w_k · r_ik
//
// so a function returning NaN ("does not apply", TRL's None) for a sample adds nothing to it.
func scoreRewards(r *Scored, rewards []Reward, st extreward.State) error {
	n := r.Len()
	prompts := make([]string, n)
	rowsCols := make([]data.Row, n)
	for i, p := range r.Prompts {
		prompts[i] = p.Text
		rowsCols[i].Columns = p.Columns
	}
	columns := data.Columns(rowsCols)
	var call *extreward.Call // made once, for the first external reward
	r.Rewards = make([]float64, n)
	r.FuncRewards = map[string][]float64{}
	for _, rw := range rewards {
		var vals []float64
		var err error
		switch {
		case rw.Scorer != nil:
			vals, err = scoreWithModel(rw.Scorer, r)
		case rw.External != nil:
			if call == nil {
				c := externalCall(r, st)
				call = &c
			}
			vals, err = rw.External.Score(*call)
		default:
			vals, err = rw.Func(prompts, r.Texts, columns)
		}
		if err != nil {
			return fmt.Errorf("reward %s: %w", rw.Name, err)
		}
		if len(vals) != n {
			return fmt.Errorf("reward %s: returned %d rewards for %d completions", rw.Name, len(vals), n)
		}
		r.FuncRewards[rw.Name] = vals
		for i, v := range vals {
			if !math.IsNaN(v) {
				r.Rewards[i] += rw.Weight * v
			}
		}
	}
	return nil
}

// advantages fills the rollout's advantages: TRL's group-relative ones (rl.TRLAdvantages, with
// scale_rewards group|batch|none) or RLOO's leave-one-out baseline.
func advantages(r *Scored, numGenerations int, scale rl.ScaleRewards, mode string) error {
	adv, std, err := rl.TRLAdvantages(r.Rewards, numGenerations, scale)
	if err != nil {
		return err
	}
	if mode == "rloo" {
		for start := 0; start < len(adv); start += numGenerations {
			copy(adv[start:], rl.GroupAdvantagesRLOO(r.Rewards[start:start+numGenerations]))
		}
	}
	r.Advantages, r.GroupStd = adv, std
	return nil
}

// rewardMetrics are TRL's reward metrics (grpo_trainer.py L1520-1567): reward (mean total),
// reward_std (mean of the std each advantage was scaled by), frac_reward_zero_std, and
// rewards/<name>/mean|std (NaN-aware: samples a function did not score are left out); and
// posttrain's rewards/<name>/undecided, the fraction of samples a function that can decline to
// decide (the Go accuracy_reward) left unscored.
func rewardMetrics(r *Scored, rewards []Reward) map[string]float64 {
	m := map[string]float64{"reward": mean(r.Rewards), "reward_std": mean(r.GroupStd)}
	zero := 0
	for _, s := range r.GroupStd {
		if math.Abs(s) <= 1e-8 {
			zero++
		}
	}
	m["frac_reward_zero_std"] = float64(zero) / float64(len(r.GroupStd))
	for _, rw := range rewards {
		var xs []float64
		for _, v := range r.FuncRewards[rw.Name] {
			if !math.IsNaN(v) {
				xs = append(xs, v)
			}
		}
		mu, sd := math.NaN(), math.NaN()
		if len(xs) > 0 {
			mu, sd = mean(xs), rl.SampleStd(xs)
		}
		m["rewards/"+rw.Name+"/mean"], m["rewards/"+rw.Name+"/std"] = mu, sd
		if rw.External != nil && rw.External.Undecidable {
			if n := len(r.FuncRewards[rw.Name]); n > 0 {
				m["rewards/"+rw.Name+"/undecided"] = float64(n-len(xs)) / float64(n)
			}
		}
	}
	return m
}

// RandomRewardName is the registered name of the random control reward.
const RandomRewardName = "random"

func init() {
	data.RegisterRewardMaker(RandomRewardName, func(seed uint64) data.RewardFunc { return (&RandomReward{Seed: seed}).Score })
}

// RandomReward is one run's reward function "random": 1 or 0 with probability ½ each, independent
// of the completion's content — the control of a GRPO experiment (a random reward must not teach
// the task; Shao et al. 2025, arXiv:2507.10532). Draws are a hash of the seed, the call number,
// the row and the texts, so a run is reproducible for a given seed and call sequence; Calls is
// the run's state (checkpoints save it, evaluation leaves it as it found it). Not safe for
// concurrent use.
type RandomReward struct {
	Seed  uint64
	Calls uint64 // calls so far: repeated calls on the same texts draw afresh
}

// Score is the data.RewardFunc of the stream.
func (r *RandomReward) Score(prompts, completions []string, _ map[string][]any) ([]float64, error) {
	r.Calls++
	call, seed := r.Calls, r.Seed
	out := make([]float64, len(completions))
	for i, c := range completions {
		h := fnv.New64a()
		fmt.Fprintf(h, "%d\x00%d\x00%d\x00", seed, call, i)
		if i < len(prompts) {
			h.Write([]byte(prompts[i]))
		}
		h.Write([]byte{0})
		h.Write([]byte(c))
		out[i] = float64(splitMix(h.Sum64()) >> 63)
	}
	return out, nil
}

func splitMix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
