package main

import (
	"fmt"
	"slices"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/trainers/engine/config"
)

// unboundedIntFlags are the integer flags that are neither lengths nor counts: any value is a
// valid seed.
var unboundedIntFlags = []string{"seed"}

// boundedFlags remembers the flags boundIntFlags has wrapped, so that a command tree built again
// (newApp in the tests) does not wrap a flag's validator twice.
var boundedFlags = map[*cli.IntFlag]bool{}

// boundIntFlags gives every integer flag of c and its subcommands, but the seeds, the bound
// config.MaxCount, checked as the flag is parsed: a length or count near the int64 limit used to
// overflow the arithmetic it entered (the prompt + new tokens context check panicked) or size an
// allocation. A flag's own validator still runs after the bound.
func boundIntFlags(c *cli.Command) {
	for _, f := range c.Flags {
		fl, ok := f.(*cli.IntFlag)
		if !ok || boundedFlags[fl] || slices.Contains(unboundedIntFlags, fl.Name) {
			continue
		}
		boundedFlags[fl] = true
		own := fl.Validator
		fl.Validator = func(v int) error {
			// urfave/cli prefixes the flag: invalid value "2147483648" for flag -gen: must be ...
			if err := config.CheckCount(v); err != nil {
				return err
			}
			if own != nil {
				return own(v)
			}
			return nil
		}
	}
	for _, sub := range c.Commands {
		boundIntFlags(sub)
	}
}

// checkTokens refuses sizes whose product, the tokens one batch holds, exceeds config.MaxCount:
// each flag is bounded alone, and `bench inputs --rows 16777216 --len 16777216` ran out of memory.
// desc names the product ("--rows × --len"); the sizes are positive.
func checkTokens(desc string, sizes ...int) error {
	p := 1
	for _, s := range sizes {
		if s > config.MaxCount/p {
			return fmt.Errorf("%s is more than %d tokens in one batch", desc, config.MaxCount)
		}
		p *= s
	}
	return nil
}
