package gymrl

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/internal/pyrand"
	"github.com/posttrain/posttrain/toy/gym"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// DQNConfig is extras/dqn_cartpole.py's main(total_steps, seed) and its constants.
type DQNConfig struct {
	Env                    string
	Seed                   int64
	TotalSteps             int
	LearningRate           float64
	BufferSize             int
	Gamma                  float64
	BatchSize              int
	StartE, EndE           float64 // ε = max(EndE, StartE − step/(ExplorationFraction·TotalSteps))
	ExplorationFraction    float64
	LearningStarts         int   // updates when step > LearningStarts …
	TrainFrequency         int   // … and step % TrainFrequency == 0
	TargetNetworkFrequency int   // θ⁻ ← θ when step % TargetNetworkFrequency == 0
	Hidden                 []int // hidden layer widths of the ReLU MLP
	PrintEvery             int   // a progress line when step % PrintEvery == 0
}

// DefaultDQN is the extras' settings: Q-network 4-120-84-2 (ReLU), Adam 2.5e-4, buffer 10,000,
// γ 0.99, batch 128, ε from 1 to 0.05 over half the steps, learning after 1,000 steps every 10,
// target copy every 500, 30,000 steps, seed 0, a line every 5,000 steps.
func DefaultDQN() DQNConfig {
	return DQNConfig{Env: "CartPole-v1", Seed: 0, TotalSteps: 30000, LearningRate: 2.5e-4, BufferSize: 10000,
		Gamma: 0.99, BatchSize: 128, StartE: 1.0, EndE: 0.05, ExplorationFraction: 0.5, LearningStarts: 1000,
		TrainFrequency: 10, TargetNetworkFrequency: 500, Hidden: []int{120, 84}, PrintEvery: 5000}
}

// Validate names the first bad setting by its flag.
func (c DQNConfig) Validate() error {
	first, check := checkCommon(c.Env, c.Seed, c.LearningRate)
	check(c.TotalSteps < 1, "total-steps %d must be >= 1", c.TotalSteps)
	check(c.BatchSize < 1, "batch-size %d must be >= 1", c.BatchSize)
	check(c.BufferSize < c.BatchSize, "buffer-size %d must be >= batch-size %d", c.BufferSize, c.BatchSize)
	check(!(c.Gamma >= 0 && c.Gamma <= 1), "gamma %v must be in [0, 1]", c.Gamma)
	check(!(c.StartE >= 0 && c.StartE <= 1) || !(c.EndE >= 0 && c.EndE <= 1), "start-e %v and end-e %v must be in [0, 1]", c.StartE, c.EndE)
	check(!(c.ExplorationFraction > 0 && c.ExplorationFraction <= 1), "exploration-fraction %v must be in (0, 1]", c.ExplorationFraction)
	check(c.LearningStarts < c.BatchSize, "learning-starts %d must be >= batch-size %d (the buffer must hold a batch)", c.LearningStarts, c.BatchSize)
	check(c.TrainFrequency < 1, "train-frequency %d must be >= 1", c.TrainFrequency)
	check(c.TargetNetworkFrequency < 1, "target-network-frequency %d must be >= 1", c.TargetNetworkFrequency)
	check(c.PrintEvery < 1, "print-every %d must be >= 1", c.PrintEvery)
	check(len(c.Hidden) == 0, "hidden: at least one layer width")
	for _, h := range c.Hidden {
		check(h < 1, "hidden: width %d must be >= 1", h)
	}
	return *first
}

// Episode is one finished episode: the step (DQN) or iteration (PPO) it ended in, and its return.
type Episode struct {
	At     int     `json:"at"`
	Return float64 `json:"return"`
}

// Progress is one progress line's numbers: the step or iteration and the mean return of the last
// (up to) 10 episodes.
type Progress struct {
	At         int     `json:"at"`
	MeanReturn float64 `json:"mean_return_last10"`
}

// Result is a run's curve: the printed lines, every episode, the progress points, and the
// extras' return value sum(returns[-10:]) / 10.
type Result struct {
	Lines    []string   `json:"-"`
	Episodes []Episode  `json:"episodes"`
	Progress []Progress `json:"progress"`
	Final    float64    `json:"final_mean_return_last10"`
}

// report records the mean return of the last 10 episodes at step or iteration at, and its line
// (the extras' print), which begins with label.
func (r *Result) report(label string, at int, returns []float64) {
	m := meanLast10(returns)
	r.Progress = append(r.Progress, Progress{At: at, MeanReturn: m})
	r.Lines = append(r.Lines, fmt.Sprintf("%s  최근 10 에피소드 평균 return %6.1f", label, m))
}

// dqnBatch is one replay minibatch (graph inputs by name).
type dqnBatch[T any] struct{ Obs, Act, Rew, Next, Done T }

// replay is the extras' deque(maxlen=BufferSize) of (obs, action, reward, next_obs, terminated),
// as a ring: index i is the i-th oldest transition, as random.sample(deque, k) indexes it.
type replay struct {
	obs, next  [][]float32
	act        []int32
	rew, done  []float32
	start, len int
}

func newReplay(n int) *replay {
	return &replay{obs: make([][]float32, n), next: make([][]float32, n), act: make([]int32, n),
		rew: make([]float32, n), done: make([]float32, n)}
}

func (b *replay) add(obs []float32, a int, r float64, next []float32, terminated bool) {
	n := len(b.obs)
	i := (b.start + b.len) % n
	if b.len == n {
		b.start = (b.start + 1) % n
	} else {
		b.len++
	}
	b.obs[i], b.next[i], b.act[i], b.rew[i] = obs, next, int32(a), float32(r)
	b.done[i] = 0
	if terminated {
		b.done[i] = 1
	}
}

// sample is random.sample(buffer, k), laid out as graph inputs.
func (b *replay) sample(r *pyrand.Rand, k int) named.Feed {
	var obs, next [][]float32
	var act []int32
	var rew, done []float32
	for _, j := range r.Sample(b.len, k) {
		i := (b.start + j) % len(b.obs)
		obs, next = append(obs, b.obs[i]), append(next, b.next[i])
		act, rew, done = append(act, b.act[i]), append(rew, b.rew[i]), append(done, b.done[i])
	}
	return named.Of[any](dqnBatch[any]{Obs: obsTensor(obs), Act: act, Rew: rew, Next: obsTensor(next), Done: done})
}

// dqnLoss is the extras' update (식 (4.1)-(4.2)): y = r + γ(1 − d)·max_a' Q_θ⁻(s', a'), with no
// gradient through y, and loss = mean((Q_θ(s, a) − y)²).
func dqnLoss(q, target *mlp, gamma float64, nAct int) step.LossFn {
	return func(ctx *context.Context, in named.Inputs) (*Node, map[string]*Node) {
		b := named.Bind[dqnBatch[*Node]](in)
		y := Add(b.Rew, Mul(MulScalar(OneMinus(b.Done), gamma), ReduceMax(target.apply(b.Next), 1))) // 식 (4.1)
		y = StopGradient(y)
		qa := ReduceSum(Mul(q.apply(b.Obs), OneHot(b.Act, nAct, float32Dtype)), 1) // Q(s, a) [B]
		loss := ReduceAllMean(Square(Sub(qa, y)))                                  // 식 (4.2), mse_loss
		return loss, nil
	}
}

// RunDQN is extras/dqn_cartpole.py's main: ε-greedy on a replay buffer with a target network.
// random.seed(seed) drives ε and the replay sampling, as in the extras; the network
// initialisation (torch.manual_seed(seed) there) draws from another random.Random(seed).
func RunDQN(b backends.Backend, c DQNConfig) (Result, error) {
	if err := c.Validate(); err != nil {
		return Result{}, err
	}
	env, _ := gym.Make(c.Env)
	sizes := append(append([]int{env.ObsDim}, c.Hidden...), env.ActionSpace.N)
	ctx := context.New()
	q := newMLP(ctx, "/q_net", sizes, relu, pyrand.New(c.Seed), true)
	target := newMLP(ctx, "/target_net", sizes, relu, pyrand.New(c.Seed), false)
	if err := target.copyFrom(q); err != nil {
		return Result{}, err
	}
	upd, err := step.New(b, ctx, step.Config{Optimizer: step.AdamW, LearningRate: c.LearningRate}, dqnLoss(q, target, c.Gamma, env.ActionSpace.N))
	if err != nil {
		return Result{}, err
	}
	act, err := step.NewContextEval(b, ctx, func(ctx *context.Context, in named.Inputs) map[string]*Node {
		return map[string]*Node{"q": q.apply(in.Get("Obs"))}
	})
	if err != nil {
		return Result{}, err
	}
	rng := pyrand.New(c.Seed) // the extras' random.seed(seed)
	buf := newReplay(c.BufferSize)
	var res Result
	var returns []float64
	epReturn := 0.0
	obs := env.ResetSeed(uint64(c.Seed))
	env.ActionSpace.Seed(uint64(c.Seed))
	for t := range c.TotalSteps {
		// The extras' max(0.05, 1.0 - step / (0.5 * total_steps)): the slope is 1/(fraction·steps),
		// so ε reaches end-e a little before the fraction (CleanRL's schedule has (start−end)/…).
		epsilon := math.Max(c.EndE, c.StartE-float64(t)/(c.ExplorationFraction*float64(c.TotalSteps)))
		var a int
		if rng.Random() < epsilon {
			a = env.ActionSpace.Sample()
		} else if a, err = greedy(act, obs); err != nil {
			return Result{}, err
		}
		next, r, term, trunc := env.Step(a)
		buf.add(obs, a, r, next, term)
		epReturn += r
		obs = next
		if term || trunc {
			returns = append(returns, epReturn)
			res.Episodes = append(res.Episodes, Episode{At: t, Return: epReturn})
			epReturn, obs = 0, env.Reset()
		}
		if t > c.LearningStarts && t%c.TrainFrequency == 0 {
			if _, err := upd.Run(buf.sample(rng, c.BatchSize)); err != nil {
				return Result{}, err
			}
		}
		if t%c.TargetNetworkFrequency == 0 {
			if err := target.copyFrom(q); err != nil {
				return Result{}, err
			}
		}
		if t%c.PrintEvery == 0 && len(returns) > 0 {
			res.report(fmt.Sprintf("step %6d", t), t, returns)
		}
	}
	res.Final = finalLast10(returns)
	return res, nil
}

// greedy is int(q_net(obs).argmax()): the first of equal maxima.
func greedy(act *step.ContextEval, obs []float32) (int, error) {
	out, err := act.Run(named.Feed{Names: []string{"Obs"}, Values: []any{obsTensor([][]float32{obs})}})
	if err != nil {
		return 0, err
	}
	qs := step.Float64s(out["q"])
	best := 0
	for i, v := range qs {
		if v > qs[best] {
			best = i
		}
	}
	return best, nil
}
