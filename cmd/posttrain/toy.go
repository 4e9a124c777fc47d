package main

import (
	"context"
	"fmt"
	"io"
	"sort"

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
