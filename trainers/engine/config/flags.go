package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/urfave/cli/v3"
)

// ConfigFlag is the flag naming a YAML file with the same keys as the flags (TRL's names).
const ConfigFlag = "config"

// Flags returns the command-line flags of cfg's options, in kebab-case, with cfg's current values
// as the defaults shown in help, plus --config FILE.yaml.
func Flags(cfg Config) []cli.Flag {
	out := []cli.Flag{&cli.StringFlag{
		Name:  ConfigFlag,
		Usage: "YAML file of options with TRL's names (learning_rate: 1e-6); flags given explicitly override it",
	}}
	for _, f := range fields(cfg) {
		if f.Flag != "-" { // a YAML-only option
			out = append(out, newFlag(f))
		}
	}
	return out
}

// newFlag is f's flag, named in kebab-case, with TRL's spellings (the option's key: learning_rate,
// model_name_or_path, and HfArgumentParser's dashed form of a key the flag renames:
// model-name-or-path, reward-funcs) as its aliases, so that a TRL command line pastes as it is.
func newFlag(f field) cli.Flag {
	usage, cat := f.Usage, f.Group+" options"
	if f.Enum != nil {
		usage += " (" + strings.Join(f.Enum, "|") + ")"
	}
	var alias []string
	if f.Key != f.Flag {
		alias = []string{f.Key}
	}
	if k := strings.ReplaceAll(f.Key, "_", "-"); k != f.Flag && k != f.Key { // --model-name-or-path, --reward-funcs
		alias = append(alias, k)
	}
	switch v := f.Value.Addr().Interface().(type) {
	case *string:
		return &cli.StringFlag{Name: f.Flag, Aliases: alias, Category: cat, Usage: usage, Value: *v}
	case *float64:
		return &cli.FloatFlag{Name: f.Flag, Aliases: alias, Category: cat, Usage: usage, Value: *v}
	case *int:
		return &cli.IntFlag{Name: f.Flag, Aliases: alias, Category: cat, Usage: usage, Value: *v}
	case *bool:
		return &cli.BoolFlag{Name: f.Flag, Aliases: alias, Category: cat, Usage: usage, Value: *v}
	case **bool:
		return &cli.BoolFlag{Name: f.Flag, Aliases: alias, Category: cat, Usage: usage}
	case *[]string:
		return &cli.StringSliceFlag{Name: f.Flag, Aliases: alias, Category: cat, Usage: usage, Value: *v}
	case *[]float64:
		return &cli.FloatSliceFlag{Name: f.Flag, Aliases: alias, Category: cat, Usage: usage, Value: *v}
	}
	panic(fmt.Sprintf("config: option %s has unsupported type %s", f.Key, f.Value.Type()))
}

// Given reports whether cmd's --config file or flags set cfg's option key (not left at the
// method's default).
func Given(cmd *cli.Command, cfg Config, key string) bool {
	f, ok := lookup(cfg, key)
	if ok && cmd.IsSet(f.Flag) {
		return true
	}
	path := cmd.String(ConfigFlag)
	return path != "" && fileKeys(path)[key]
}

// applyFlags copies the flags given explicitly on the command line into cfg.
func applyFlags(cmd *cli.Command, cfg Config) {
	for _, f := range fields(cfg) {
		if !cmd.IsSet(f.Flag) {
			continue
		}
		switch v := f.Value.Addr().Interface().(type) {
		case *string:
			*v = cmd.String(f.Flag)
		case *float64:
			*v = cmd.Float(f.Flag)
		case *int:
			*v = cmd.Int(f.Flag)
		case *bool:
			*v = cmd.Bool(f.Flag)
		case **bool:
			b := cmd.Bool(f.Flag)
			*v = &b
		case *[]string:
			*v = splitTrim(cmd.StringSlice(f.Flag))
		case *[]float64:
			*v = cmd.FloatSlice(f.Flag)
		default:
			panic(fmt.Sprintf("config: option %s has unsupported type %s", f.Key, reflect.TypeOf(v)))
		}
	}
}

// splitTrim trims spaces around the names of a list flag ("a, b" → [a b]).
func splitTrim(in []string) []string {
	out := make([]string, 0, len(in))
	for _, s := range in {
		out = append(out, strings.TrimSpace(s))
	}
	return out
}

// FromCommand fills cfg (holding the method's defaults) from the command line: the --config file
// first, then the flags given explicitly; then it resolves derived defaults and validates. Errors
// are one line: "config.yaml:3: unknown key ..." or "learning_rate (--learning-rate) must be > 0".
func FromCommand(cmd *cli.Command, cfg Config) error {
	if path := cmd.String(ConfigFlag); path != "" {
		notes, err := LoadFileNotes(path, cfg)
		if err != nil {
			return err
		}
		for _, n := range notes {
			fmt.Fprintln(cmd.Root().ErrWriter, n)
		}
	}
	applyFlags(cmd, cfg)
	cfg.Resolve()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s: %w", cmd.Name, err)
	}
	return nil
}
