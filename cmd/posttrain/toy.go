package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/urfave/cli/v3"
)

// toyExperiment is one `posttrain toy <name>` experiment of the course.
//
// Each experiment's file registers it with addToy from an init function. Its Command carries the
// flags (the course's defaults) and the Action; Course prints the lines the course printed for the
// phase at its defaults (what `posttrain toy course` concatenates, in Phase order).
type toyExperiment struct {
	Phase   int // course phase 1..12; experiments of one phase print in Order within it
	Order   int // position within the phase for `toy course`
	Command *cli.Command
	Course  func(w io.Writer) error // nil: the experiment is not part of `toy course`
}

var toyExperiments []toyExperiment

// addToy registers a toy experiment; called from init functions.
func addToy(e toyExperiment) { toyExperiments = append(toyExperiments, e) }

func sortedToys() []toyExperiment {
	out := append([]toyExperiment(nil), toyExperiments...)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Phase != out[j].Phase {
			return out[i].Phase < out[j].Phase
		}
		return out[i].Order < out[j].Order
	})
	return out
}

func init() {
	addCommand(&cli.Command{
		Name:      "toy",
		Usage:     "run the course's toy experiments (5-cell corridor, TinyLM) with the course's numbers",
		ArgsUsage: "<experiment>",
		// Subcommands are attached by attachToys: experiments register from other files' init functions.
		Action: func(ctx context.Context, cmd *cli.Command) error {
			names := toyNames()
			if cmd.Args().Len() == 0 {
				return usageError{fmt.Errorf("toy: missing experiment; valid: %s", names)}
			}
			return usageError{fmt.Errorf("toy: unknown experiment %q; valid: %s", cmd.Args().First(), names)}
		},
	})
}

// attachToys attaches every registered experiment, plus `course`, to the `toy` command (once).
func attachToys() {
	var toy *cli.Command
	for _, c := range commands {
		if c.Name == "toy" {
			toy = c
		}
	}
	if toy == nil || toy.Commands != nil {
		return
	}
	for _, e := range sortedToys() {
		toy.Commands = append(toy.Commands, e.Command)
	}
	toy.Commands = append(toy.Commands, &cli.Command{
		Name:  "course",
		Usage: "print the lines of every course phase implemented so far, exactly as the course printed them",
		Action: func(ctx context.Context, cmd *cli.Command) error {
			return runCourse(cmd.Root().Writer)
		},
	})
}

func toyNames() string {
	attachToys()
	for _, c := range commands {
		if c.Name == "toy" {
			return commandNames(c.Commands)
		}
	}
	return ""
}

// runCourse prints every registered phase's course lines in phase order.
func runCourse(w io.Writer) error {
	for _, e := range sortedToys() {
		if e.Course == nil {
			continue
		}
		if err := e.Course(w); err != nil {
			return fmt.Errorf("toy course: phase %d (%s): %w", e.Phase, e.Command.Name, err)
		}
	}
	return nil
}

// Flags and errors shared by the corridor and TinyLM experiments.

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print one JSON object (phase, args, results) instead of the course's lines"}
}

func seedFlag() cli.Flag {
	return &cli.Int64Flag{Name: "seed", Value: 0, Usage: "seed of the experiment's random.Random"}
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

// toyUsageError makes a flag parse error a usage error (exit status 2) naming the experiment.
func toyUsageError(ctx context.Context, cmd *cli.Command, err error, isSubcommand bool) error {
	return usageError{fmt.Errorf("toy %s: %w (see --help)", cmd.Name, err)}
}

// noToyArgs rejects positional arguments: an experiment's settings are flags.
func noToyArgs(cmd *cli.Command) error {
	if cmd.Args().Len() > 0 {
		return usageError{fmt.Errorf("toy %s: unexpected argument %q (settings are flags, see --help)",
			cmd.Name, cmd.Args().First())}
	}
	return nil
}
