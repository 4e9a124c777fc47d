package main

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// commandOf is the command args run (args[0] is the program): the deepest subcommand named by the
// leading arguments that are not flags.
func commandOf(app *cli.Command, args []string) *cli.Command {
	cmd := app
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			break
		}
		var next *cli.Command
		for _, c := range cmd.Commands {
			if c.Name == a || slices.Contains(c.Aliases, a) {
				next = c
			}
		}
		if next == nil {
			break
		}
		cmd = next
	}
	return cmd
}

// hfBools are the words HF's HfArgumentParser reads as a boolean flag's value (string_to_bool).
var hfBools = map[string]string{"true": "true", "yes": "true", "t": "true", "y": "true", "1": "true",
	"false": "false", "no": "false", "f": "false", "n": "false", "0": "false"}

// hfBoolValues rewrites `--flag True` (HF's and TRL's command lines: a boolean flag followed by
// its value) as `--flag=true` for the boolean flags of the command args run; the rest is as
// given.
func hfBoolValues(app *cli.Command, args []string) []string {
	bools := map[string]bool{}
	for _, f := range commandOf(app, args).Flags {
		if _, ok := f.(*cli.BoolFlag); ok {
			for _, n := range f.Names() {
				bools[n] = true
			}
		}
	}
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		name := strings.TrimLeft(a, "-")
		if i > 0 && strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && bools[name] && i+1 < len(args) {
			if v, ok := hfBools[strings.ToLower(args[i+1])]; ok {
				out = append(out, a+"="+v)
				i++
				continue
			}
		}
		out = append(out, a)
	}
	return out
}

var undefinedFlag = regexp.MustCompile(`flag provided but not defined: -+([^\s;]+)`)

// flagSuggestion is "; did you mean --NAME?" for an error about an undefined flag of the command
// args run, naming its nearest flag (TRL's snake_case read as kebab-case); "" otherwise.
func flagSuggestion(app *cli.Command, args []string, msg string) string {
	m := undefinedFlag.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	want := strings.ReplaceAll(strings.ToLower(m[1]), "_", "-")
	best, bestDist := "", 4
	for _, f := range commandOf(app, args).Flags {
		name := f.Names()[0]
		if d := config.EditDistance(want, name); d < bestDist || (d == bestDist && len(name) < len(best)) {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean --%s?", best)
}

// repeatedFlag refuses a flag that takes one value given more than once (urfave/cli, like
// argparse, would keep the last silently: `--dataset a.jsonl --dataset b.jsonl` trained on b
// alone); list flags may repeat.
func repeatedFlag(app *cli.Command, args []string) error {
	primary := map[string]string{}
	for _, f := range commandOf(app, args).Flags {
		switch f.(type) {
		case *cli.StringSliceFlag, *cli.FloatSliceFlag, *cli.IntSliceFlag:
			continue
		}
		for _, n := range f.Names() {
			primary[n] = f.Names()[0]
		}
	}
	seen := map[string]string{}
	for _, a := range args[1:] {
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		p, ok := primary[name]
		if !ok {
			continue
		}
		if prev, dup := seen[p]; dup {
			return fmt.Errorf("--%s is given twice (as %s and %s): it takes one value (several datasets as a mixture are not supported)", p, prev, a)
		}
		seen[p] = a
	}
	return nil
}

// onePrefix drops the repeats of an error's leading "name: " ("grpo: grpo: step 3: …" → "grpo:
// step 3: …"): the command names itself, and so do the packages it calls.
func onePrefix(msg string) string {
	for {
		first, rest, ok := strings.Cut(msg, ": ")
		if !ok || strings.ContainsAny(first, " /") {
			return msg
		}
		second, _, ok := strings.Cut(rest, ": ")
		if !ok || second != first {
			return msg
		}
		msg = rest
	}
}
