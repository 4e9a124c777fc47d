package main

// `posttrain toy return|bellman|qlearning|dqn|reinforce|a2c|ppo`: the course's corridor phases 1-7
// (toy/corridor). Each prints the phase's lines exactly as the course did at the default flags, or
// with --json one object: {"phase", "args" (the settings, snake_case as in the course), results}.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

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

// addCorridorToy registers one corridor phase as `posttrain toy <name>`, plus its course lines.
func addCorridorToy(phase int, name, usage string, flags []cli.Flag, exec corridorExec,
	course func() (corridor.Result, error)) {
	flags = append([]cli.Flag{
		&cli.BoolFlag{Name: "json", Usage: "print one JSON object (phase, args, results) instead of the course's lines"},
		&cli.Int64Flag{Name: "seed", Value: 0, Usage: "seed of the experiment's random.Random"},
	}, flags...)
	addToy(toyExperiment{
		Phase: phase,
		Command: &cli.Command{
			Name:   name,
			Usage:  fmt.Sprintf("course phase %d: %s", phase, usage),
			Flags:  flags,
			Action: corridorAction(phase, exec),
			OnUsageError: func(ctx context.Context, cmd *cli.Command, err error, isSubcommand bool) error {
				return usageError{fmt.Errorf("toy %s: %w (see --help)", cmd.Name, err)}
			},
		},
		Course: func(w io.Writer) error {
			r, err := course()
			if err != nil {
				return err
			}
			return writeLines(w, r.Lines())
		},
	})
}

func corridorAction(phase int, exec corridorExec) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		if cmd.Args().Len() > 0 {
			return usageError{fmt.Errorf("toy %s: unexpected argument %q (settings are flags, see --help)",
				cmd.Name, cmd.Args().First())}
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

func writeLines(w io.Writer, lines []string) error {
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

func intFlag(name string, value int, usage string) cli.Flag {
	return &cli.IntFlag{Name: name, Value: value, Usage: usage}
}

func floatFlag(name string, value float64, usage string) cli.Flag {
	return &cli.FloatFlag{Name: name, Value: value, Usage: usage}
}

// parseFloatList parses --p's comma-separated list of numbers.
func parseFloatList(cmd *cli.Command, flag string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(cmd.String(flag), ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, usageError{fmt.Errorf("toy %s: --%s wants comma-separated numbers like 0.5,0.7,1.0; %q is not a number",
				cmd.Name, flag, strings.TrimSpace(f))}
		}
		out = append(out, x)
	}
	return out, nil
}

func init() {
	addReturnToy()
	addBellmanToy()
	addQLearningToy()
}

func addReturnToy() {
	d1 := corridor.DefaultPhase1()
	addCorridorToy(1, "return", "returns G_t (식 (1.1)-(1.2)) and a Monte Carlo estimate of J (식 (1.3))", []cli.Flag{
		intFlag("episodes", d1.Episodes, "Monte Carlo episodes per estimate of J"),
		floatFlag("gamma", d1.Gamma, "discount γ of J"),
		&cli.StringFlag{Name: "p", Value: "0.5,0.7,1.0", Usage: "comma-separated P(→) of the policies whose J is estimated"},
		intFlag("demo-seeds", d1.DemoSeeds, "random-policy demo episodes, with seeds 0..N-1"),
	}, func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		p, err := parseFloatList(cmd, "p")
		if err != nil {
			return nil, nil, err
		}
		return runCorridor(cmd, corridor.Phase1Config{Seed: cmd.Int64("seed"), Episodes: cmd.Int("episodes"),
			Gamma: cmd.Float("gamma"), P: p, DemoSeeds: cmd.Int("demo-seeds")}, corridor.RunPhase1)
	}, func() (corridor.Result, error) { return corridor.RunPhase1(d1) })
}

func addBellmanToy() {
	d2 := corridor.DefaultPhase2()
	addCorridorToy(2, "bellman", "Bellman evaluation (식 (2.3)-(2.4)), Monte Carlo and TD(0) (식 (2.5)-(2.6))", []cli.Flag{
		floatFlag("p", d2.P, "P(→) of the evaluated policy"),
		intFlag("episodes", d2.Episodes, "TD(0) episodes"),
		floatFlag("alpha", d2.Alpha, "TD(0) step size α"),
		floatFlag("gamma", d2.Gamma, "discount γ"),
		intFlag("sweeps", d2.Sweeps, "iterative policy evaluation sweeps"),
	}, func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		return runCorridor(cmd, corridor.Phase2Config{Seed: cmd.Int64("seed"), P: cmd.Float("p"),
			Episodes: cmd.Int("episodes"), Alpha: cmd.Float("alpha"), Gamma: cmd.Float("gamma"),
			Sweeps: cmd.Int("sweeps")}, corridor.RunPhase2)
	}, func() (corridor.Result, error) { return corridor.RunPhase2(d2) })
}

func addQLearningToy() {
	d3 := corridor.DefaultPhase3()
	addCorridorToy(3, "qlearning", "tabular Q-learning with ε-greedy (식 (3.2)-(3.3)) against Q* (식 (3.1))", []cli.Flag{
		intFlag("episodes", d3.Episodes, "training episodes"),
		floatFlag("alpha", d3.Alpha, "step size α"),
		floatFlag("gamma", d3.Gamma, "discount γ (also of Q*)"),
		floatFlag("epsilon", d3.Epsilon, "exploration probability ε"),
	}, func(cmd *cli.Command) (corridor.Result, corridor.Object, error) {
		return runCorridor(cmd, corridor.Phase3Config{Seed: cmd.Int64("seed"), Episodes: cmd.Int("episodes"),
			Alpha: cmd.Float("alpha"), Gamma: cmd.Float("gamma"), Epsilon: cmd.Float("epsilon")}, corridor.RunPhase3)
	}, func() (corridor.Result, error) { return corridor.RunPhase3(d3) })
}
