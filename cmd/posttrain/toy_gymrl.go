package main

// `posttrain toy cartpole-dqn|cartpole-ppo`: the course's extras (extras/dqn_cartpole.py,
// extras/ppo_cartpole.py) on Gymnasium's CartPole-v1 or Acrobot-v1 (toy/gym, toy/gymrl). They
// print the extras' progress lines; --json prints one object with the settings and the whole
// curve. Not part of `toy course`: the extras' numbers come from PyTorch's RNG.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/posttrain/posttrain/toy/corridor"
	"github.com/posttrain/posttrain/toy/gym"
	"github.com/posttrain/posttrain/toy/gymrl"
	"github.com/urfave/cli/v3"
)

func init() {
	addGymToy(4, "cartpole-dqn", "the phase 4 extra: DQN (CleanRL dqn.py, shortened) on CartPole-v1 or Acrobot-v1",
		gymrl.DefaultDQN, func(c *gymrl.DQNConfig) []toyParam {
			return []toyParam{envVar(&c.Env), seedVar(&c.Seed),
				intVar(&c.TotalSteps, "total-steps", "environment steps"),
				floatVar(&c.LearningRate, "learning-rate", "Adam learning rate"),
				intVar(&c.BufferSize, "buffer-size", "replay buffer size (deque maxlen)"),
				floatVar(&c.Gamma, "gamma", "discount γ"),
				intVar(&c.BatchSize, "batch-size", "replay minibatch size"),
				floatVar(&c.StartE, "start-e", "ε at step 0"),
				floatVar(&c.EndE, "end-e", "lowest ε"),
				floatVar(&c.ExplorationFraction, "exploration-fraction", "ε = max(end-e, start-e − step/(fraction·total-steps))"),
				intVar(&c.LearningStarts, "learning-starts", "update only after this many steps"),
				intVar(&c.TrainFrequency, "train-frequency", "update every this many steps"),
				intVar(&c.TargetNetworkFrequency, "target-network-frequency", "copy θ into θ⁻ every this many steps"),
				intListVar(&c.Hidden, "hidden", "hidden layer widths of the ReLU Q-network"),
				intVar(&c.PrintEvery, "print-every", "a progress line every this many steps")}
		}, gymrl.RunDQN)
	addGymToy(7, "cartpole-ppo", "the phase 7 extra: PPO (CleanRL ppo.py, shortened) on CartPole-v1 or Acrobot-v1",
		gymrl.DefaultPPO, func(c *gymrl.PPOConfig) []toyParam {
			return []toyParam{envVar(&c.Env), seedVar(&c.Seed),
				intVar(&c.Iterations, "iterations", "rollout-and-update iterations"),
				floatVar(&c.LearningRate, "learning-rate", "Adam learning rate (actor and critic)"),
				intVar(&c.NumSteps, "num-steps", "rollout steps T per iteration"),
				floatVar(&c.Gamma, "gamma", "discount γ"),
				floatVar(&c.GAELambda, "gae-lambda", "GAE λ"),
				floatVar(&c.ClipCoef, "clip-coef", "ratio clip ε"),
				intVar(&c.UpdateEpochs, "update-epochs", "epochs over each rollout"),
				intVar(&c.MinibatchSize, "minibatch-size", "minibatch size"),
				boolVar(&c.NormAdv, "norm-adv", "normalise advantages within each minibatch (--norm-adv=false: off)"),
				floatVar(&c.VFCoef, "vf-coef", "value loss coefficient"),
				floatVar(&c.EntCoef, "ent-coef", "entropy bonus coefficient"),
				floatVar(&c.MaxGradNorm, "max-grad-norm", "global gradient norm clip (0: none)"),
				intListVar(&c.Hidden, "hidden", "hidden layer widths of the tanh actor and critic"),
				intVar(&c.PrintEvery, "print-every", "a progress line every this many iterations")}
		}, gymrl.RunPPO)
}

// addGymToy registers one extra: its flags (bound to the defaults), and an action that reads
// them, validates (a usage error naming the flag), runs on --backend and prints.
func addGymToy[C interface{ Validate() error }](phase int, name, usage string, defaults func() C,
	bind func(c *C) []toyParam, run func(backends.Backend, C) (gymrl.Result, error)) {
	d := defaults()
	flags := append([]cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print one JSON object (args and the whole curve) instead of the progress lines"},
		backendFlag()}, toyFlags(bind(&d))...)
	addToy(toyExperiment{
		Phase: phase, Order: 91,
		Command: &cli.Command{
			Name: name, Usage: usage, Flags: flags, OnUsageError: toyUsageError,
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if err := noToyArgs(cmd); err != nil {
					return err
				}
				c := defaults()
				params := bind(&c)
				if err := readToyParams(cmd, params); err != nil {
					return err
				}
				if err := c.Validate(); err != nil {
					return usageError{fmt.Errorf("toy %s: --%w", name, err)}
				}
				b, err := newBackend(cmd.Root().ErrWriter, cmd.String("backend"))
				if err != nil {
					return usageError{fmt.Errorf("toy %s: --%w", name, err)}
				}
				defer b.Finalize()
				res, err := run(b, c)
				if err != nil {
					return fmt.Errorf("toy %s: %w", name, err)
				}
				return printGymResult(cmd, params, res)
			},
		},
	})
}

func printGymResult(cmd *cli.Command, params []toyParam, res gymrl.Result) error {
	w := cmd.Root().Writer
	if !cmd.Bool("json") {
		return writeLines(w, res.Lines)
	}
	args := corridor.Object{}
	for _, p := range params {
		args = append(args, corridor.Field{Key: p.key, Value: p.arg()})
	}
	b, err := json.Marshal(struct {
		Extra string          `json:"extra"`
		Args  corridor.Object `json:"args"`
		gymrl.Result
	}{cmd.Name, args, res})
	if err != nil {
		return fmt.Errorf("toy %s: %w", cmd.Name, err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func envVar(p *string) toyParam {
	return stringVar(p, "env", "Gymnasium environment: "+strings.Join(gym.IDs, " or "))
}

func boolVar(p *bool, name, usage string) toyParam {
	return newToyParam(&cli.BoolFlag{Name: name, Value: *p, Usage: usage},
		func(cmd *cli.Command) error { *p = cmd.Bool(name); return nil }, func() any { return *p })
}

// intListVar is a comma-separated list of integers, e.g. --hidden 120,84.
func intListVar(p *[]int, name, usage string) toyParam {
	def := make([]string, len(*p))
	for i, x := range *p {
		def[i] = strconv.Itoa(x)
	}
	return newToyParam(&cli.StringFlag{Name: name, Value: strings.Join(def, ","), Usage: usage}, func(cmd *cli.Command) error {
		var xs []int
		for _, f := range strings.Split(cmd.String(name), ",") {
			x, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return usageError{fmt.Errorf("toy %s: --%s wants comma-separated integers like %s; %q is not one",
					cmd.Name, name, strings.Join(def, ","), strings.TrimSpace(f))}
			}
			xs = append(xs, x)
		}
		*p = xs
		return nil
	}, func() any { return *p })
}
