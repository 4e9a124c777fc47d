package main

import (
	"context"
	"errors"
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
			announceBackend(cmd.Root().ErrWriter, "", nil)
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

func writeLines(w io.Writer, lines []string) error {
	_, err := io.WriteString(w, strings.Join(lines, "\n")+"\n")
	return err
}

// toyParam is one setting of a toy experiment, declared once: its flag (name, usage, and the
// course's default, the bound field's value when the flag is made), the field the flag's value is
// read into, and its key and value in --json's "args" (the flag's name in snake_case unless
// renamed with as). The experiment's settings are a value whose fields the params are bound to:
// bound to the defaults they make the flags, bound to a fresh copy they read a run's settings.
type toyParam struct {
	flag cli.Flag
	key  string
	read func(cmd *cli.Command) error // stores the flag's value in the field (a usage error if it is not one)
	arg  func() any                   // the field's value as "args" shows it (nil: null)
}

func newToyParam(flag cli.Flag, read func(cmd *cli.Command) error, arg func() any) toyParam {
	return toyParam{flag: flag, key: strings.ReplaceAll(flag.Names()[0], "-", "_"), read: read, arg: arg}
}

// as renames the param's "args" key.
func (p toyParam) as(key string) toyParam {
	p.key = key
	return p
}

func toyFlags(params []toyParam) []cli.Flag {
	flags := make([]cli.Flag, len(params))
	for i, p := range params {
		flags[i] = p.flag
	}
	return flags
}

// readToyParams reads every param's flag into its field; the values that do not parse are one
// usage error.
func readToyParams(cmd *cli.Command, params []toyParam) error {
	var errs []error
	for _, p := range params {
		if err := p.read(cmd); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return usageError{err}
	}
	return nil
}

func seedVar(p *int64) toyParam {
	return newToyParam(&cli.Int64Flag{Name: "seed", Value: *p, Usage: "seed of the experiment's random.Random"},
		func(cmd *cli.Command) error { *p = cmd.Int64("seed"); return nil }, func() any { return *p })
}

func intVar(p *int, name, usage string) toyParam {
	return newToyParam(&cli.IntFlag{Name: name, Value: *p, Usage: usage},
		func(cmd *cli.Command) error { *p = cmd.Int(name); return nil }, func() any { return *p })
}

func floatVar(p *float64, name, usage string) toyParam {
	return newToyParam(&cli.FloatFlag{Name: name, Value: *p, Usage: usage},
		func(cmd *cli.Command) error { *p = cmd.Float(name); return nil }, func() any { return *p })
}

func stringVar(p *string, name, usage string) toyParam {
	return newToyParam(&cli.StringFlag{Name: name, Value: *p, Usage: usage},
		func(cmd *cli.Command) error { *p = cmd.String(name); return nil }, func() any { return *p })
}

// floatListVar is a comma-separated list of numbers; value is its default as the help shows it.
func floatListVar(p *[]float64, name, value, usage string) toyParam {
	return newToyParam(&cli.StringFlag{Name: name, Value: value, Usage: usage}, func(cmd *cli.Command) error {
		xs, err := parseFloatList(cmd, name)
		*p = xs
		return err
	}, func() any { return *p })
}

// floatListTextVar is a comma-separated list of numbers kept as text, parsed where it is used (an
// alternative flag may make it unused); "args" shows the numbers, null when they do not parse.
func floatListTextVar(p *string, name, usage string) toyParam {
	return newToyParam(&cli.StringFlag{Name: name, Value: *p, Usage: usage},
		func(cmd *cli.Command) error { *p = cmd.String(name); return nil },
		func() any { xs, _ := parseFloats("", name, *p); return xs })
}

// Optional settings are string flags whose empty default means "the course's value" (nil in the
// field, None in the golden's args). urfave/cli's IsSet is not used: it stays true across runs in
// one process.

// optVar is an optional setting parsed by parse (want names the expected form in its error).
func optVar[T any](p **T, name, usage, want string, parse func(string) (T, error)) toyParam {
	return newToyParam(&cli.StringFlag{Name: name, Usage: usage}, func(cmd *cli.Command) error {
		*p = nil
		s := strings.TrimSpace(cmd.String(name))
		if s == "" {
			return nil
		}
		x, err := parse(s)
		if err != nil {
			return usageError{fmt.Errorf("toy %s: --%s %q%s", cmd.Name, name, s, want)}
		}
		*p = &x
		return nil
	}, func() any {
		if *p == nil {
			return nil
		}
		return **p
	})
}

func optFloatVar(p **float64, name, usage string) toyParam {
	return optVar(p, name, usage, " is not a number", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
}

func optIntVar(p **int, name, usage string) toyParam {
	return optVar(p, name, usage, " is not an integer", strconv.Atoi)
}

func optBoolVar(p **bool, name, usage string) toyParam {
	return optVar(p, name, usage, ": want true or false", strconv.ParseBool)
}

func optStringVar(p **string, name, usage string) toyParam {
	return optVar(p, name, usage, "", func(s string) (string, error) { return s, nil })
}

// parseFloatList parses a flag's comma-separated list of numbers (--p, --betas).
func parseFloatList(cmd *cli.Command, flag string) ([]float64, error) {
	return parseFloats(cmd.Name, flag, cmd.String(flag))
}

// parseFloats parses the comma-separated numbers s of toy's flag.
func parseFloats(toy, flag, s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, usageError{fmt.Errorf("toy %s: --%s wants comma-separated numbers like 0.5,0.7,1.0; %q is not a number",
				toy, flag, strings.TrimSpace(f))}
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
