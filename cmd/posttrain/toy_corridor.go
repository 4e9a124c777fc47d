package main

// `posttrain toy return|bellman|qlearning|dqn|reinforce|a2c|ppo`: the course's corridor phases 1-7
// (toy/corridor). Each prints the phase's lines exactly as the course did at the default flags, or
// with --json one object: {"phase", "args" (the settings, snake_case as in the course), results}.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/posttrain/posttrain/toy/corridor"
	"github.com/urfave/cli/v3"
)

// corridorConfig is a phase's settings: checked up front, reported as the JSON "args".
type corridorConfig interface {
	Validate() error
	Args() corridor.Object
}

// corridorExec reads a phase's flags, runs it and returns its result and its JSON "args".
type corridorExec func(cmd *cli.Command) (corridor.Result, corridor.Object, error)

// addCorridorToy registers one corridor phase as `posttrain toy <name>`, plus its course lines
// (run at defaults()). bind lists the phase's settings, bound to the fields of the config it is
// given; the JSON "args" are the config's own (Args, the course's keys and number format).
func addCorridorToy[C corridorConfig, R corridor.Result](phase int, name, usage string,
	defaults func() C, bind func(c *C) []toyParam, run func(C) (R, error)) {
	d := defaults()
	flags := append([]cli.Flag{jsonFlag()}, toyFlags(bind(&d))...)
	exec := func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		c := defaults()
		if err := readToyParams(cmd, bind(&c)); err != nil {
			return nil, nil, err
		}
		return runCorridor(cmd, c, run)
	}
	addToy(toyExperiment{
		Phase: phase,
		Command: &cli.Command{
			Name:         name,
			Usage:        fmt.Sprintf("course phase %d: %s", phase, usage),
			Flags:        flags,
			Action:       corridorAction(phase, exec),
			OnUsageError: toyUsageError,
		},
		Course: func(w io.Writer) error {
			r, err := run(defaults())
			if err != nil {
				return err
			}
			return writeLines(w, r.Lines())
		},
	})
}

// runCorridor validates c (a bad value is a usage error naming its flag) and runs the phase.
func runCorridor[C corridorConfig, R corridor.Result](cmd *cli.Command, c C, run func(C) (R, error)) (corridor.Result, corridor.Object, error) {
	if err := c.Validate(); err != nil {
		return nil, nil, usageError{fmt.Errorf("toy %s: --%w", cmd.Name, err)}
	}
	r, err := run(c)
	if err != nil {
		return nil, nil, fmt.Errorf("toy %s: %w", cmd.Name, err)
	}
	return r, c.Args(), nil
}

func corridorAction(phase int, exec corridorExec) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		if err := noToyArgs(cmd); err != nil {
			return err
		}
		r, args, err := exec(cmd)
		if err != nil {
			return err
		}
		w := cmd.Root().Writer
		if !cmd.Bool("json") {
			return writeLines(w, r.Lines())
		}
		out := corridor.Object{{Key: "phase", Value: phase},
			{Key: "args", Value: append(corridor.Object{{Key: "json", Value: true}}, args...)}}
		b, err := json.Marshal(append(out, r.Results()...))
		if err != nil {
			return fmt.Errorf("toy %s: %w", cmd.Name, err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
}

func init() {
	addReturnToy()
	addBellmanToy()
	addQLearningToy()
}

func addReturnToy() {
	addCorridorToy(1, "return", "returns G_t (식 (1.1)-(1.2)) and a Monte Carlo estimate of J (식 (1.3))",
		corridor.DefaultPhase1, func(c *corridor.Phase1Config) []toyParam {
			return []toyParam{seedVar(&c.Seed),
				intVar(&c.Episodes, "episodes", "Monte Carlo episodes per estimate of J"),
				floatVar(&c.Gamma, "gamma", "discount γ of J"),
				floatListVar(&c.P, "p", "0.5,0.7,1.0", "comma-separated P(→) of the policies whose J is estimated"),
				intVar(&c.DemoSeeds, "demo-seeds", "random-policy demo episodes, with seeds 0..N-1")}
		}, corridor.RunPhase1)
}

func addBellmanToy() {
	addCorridorToy(2, "bellman", "Bellman evaluation (식 (2.3)-(2.4)), Monte Carlo and TD(0) (식 (2.5)-(2.6))",
		corridor.DefaultPhase2, func(c *corridor.Phase2Config) []toyParam {
			return []toyParam{seedVar(&c.Seed),
				floatVar(&c.P, "p", "P(→) of the evaluated policy"),
				intVar(&c.Episodes, "episodes", "TD(0) episodes"),
				floatVar(&c.Alpha, "alpha", "TD(0) step size α"),
				floatVar(&c.Gamma, "gamma", "discount γ"),
				intVar(&c.Sweeps, "sweeps", "iterative policy evaluation sweeps")}
		}, corridor.RunPhase2)
}

func addQLearningToy() {
	addCorridorToy(3, "qlearning", "tabular Q-learning with ε-greedy (식 (3.2)-(3.3)) against Q* (식 (3.1))",
		corridor.DefaultPhase3, func(c *corridor.Phase3Config) []toyParam {
			return []toyParam{seedVar(&c.Seed),
				intVar(&c.Episodes, "episodes", "training episodes"),
				floatVar(&c.Alpha, "alpha", "step size α"),
				floatVar(&c.Gamma, "gamma", "discount γ (also of Q*)"),
				floatVar(&c.Epsilon, "epsilon", "exploration probability ε")}
		}, corridor.RunPhase3)
}
