// Package trainers is the one place that knows every post-training method. Each method's package
// (trainers/sft, dpo, kto, reward, grpo, ppo) holds its TRL configuration beside its trainer and
// starts the same way (Run); the command line, the demos and the tests construct and start a
// method through this list.
package trainers

import (
	"context"
	"fmt"
	"strings"

	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/kto"
	"github.com/posttrain/posttrain/trainers/ppo"
	"github.com/posttrain/posttrain/trainers/reward"
	"github.com/posttrain/posttrain/trainers/sft"
)

// Method is one post-training method.
type Method struct {
	Name    string               // the subcommand and config.Config.Method: "sft", ...
	Default func() config.Config // its configuration with TRL's defaults
	// Run trains the model in modelDir with cfg (a configuration Default made, filled and
	// validated): the method's own Run.
	Run func(ctx context.Context, cfg config.Config, modelDir string, env loop.Env) (*loop.Result, error)
}

// Methods are the methods in the order the command line lists them.
var Methods = []Method{
	method("sft", sft.DefaultConfig, sft.Run),
	method("dpo", dpo.DefaultConfig, dpo.Run),
	method("kto", kto.DefaultConfig, kto.Run),
	method("reward", reward.DefaultConfig, reward.Run),
	method("grpo", grpo.DefaultConfig, func(ctx context.Context, cfg *grpo.Config, dir string, env loop.Env) (*loop.Result, error) {
		return grpo.Run(ctx, cfg, dir, grpo.RunOptions{Env: env})
	}),
	method("ppo", ppo.DefaultConfig, func(ctx context.Context, cfg *ppo.Config, dir string, env loop.Env) (*loop.Result, error) {
		return ppo.Run(ctx, cfg, dir, ppo.RunOptions{Env: env})
	}),
}

// method is the Method of a configuration type C.
func method[C config.Config](name string, def func() C, run func(context.Context, C, string, loop.Env) (*loop.Result, error)) Method {
	return Method{
		Name:    name,
		Default: func() config.Config { return def() },
		Run: func(ctx context.Context, cfg config.Config, dir string, env loop.Env) (*loop.Result, error) {
			c, ok := cfg.(C)
			if !ok {
				return nil, fmt.Errorf("%s: a %s configuration was given", name, cfg.Method())
			}
			return run(ctx, c, dir, env)
		},
	}
}

// Lookup returns the method named name.
func Lookup(name string) (Method, error) {
	for _, m := range Methods {
		if m.Name == name {
			return m, nil
		}
	}
	return Method{}, fmt.Errorf("unknown training method %q; valid: %s", name, strings.Join(Names(), ", "))
}

// Names are the methods' names.
func Names() []string {
	out := make([]string, len(Methods))
	for i, m := range Methods {
		out[i] = m.Name
	}
	return out
}

// New returns the default configuration of the method named name.
func New(name string) (config.Config, error) {
	m, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	return m.Default(), nil
}
