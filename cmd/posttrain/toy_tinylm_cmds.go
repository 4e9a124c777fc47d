package main

// The six TinyLM experiments (phases 8-12): flags are the golden's "args" keys in kebab-case,
// defaulting to the course's values.

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/toy/tinylm"
	"github.com/posttrain/posttrain/toy/tinylmgomlx"
	"github.com/posttrain/posttrain/trainers/rl"
)

func init() {
	addLMReinforceToy()
	addRLHFToy()
	addPrefToys()
	addGRPOToys()
}

// set assigns *p to *dst when p is not nil.
func set[T any](dst *T, p *T) {
	if p != nil {
		*dst = *p
	}
}

func orZero(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func addLMReinforceToy() {
	d := tinylm.DefaultReinforceKL(0)
	addLMToy(lmToy{
		phase: 8, name: "lm-reinforce",
		usage: "sequence REINFORCE with a KL penalty R − β·log π/π_ref (식 (8.3)-(8.5))",
		flags: []cli.Flag{seedFlag(),
			&cli.StringFlag{Name: "betas", Value: "0.0,0.5", Usage: "comma-separated KL coefficients β, one run each"},
			optionalFlag("beta", "a single β instead of --betas"),
			intFlag("iterations", d.Iterations, "iterations (one update each)"),
			intFlag("group", d.Group, "samples per prompt per iteration"),
			floatFlag("lr", d.LR, "learning rate of the plain gradient step"),
			floatFlag("optimum-beta", tinylm.Phase8OptimumBeta, "β of the printed KL-regularised optimum (식 (8.5))"),
			traceFlag()},
		args: func(cmd *cli.Command) kvs {
			betas, _ := parseFloatList(cmd, "betas")
			beta, _ := optFloat(cmd, "beta")
			return kvs{{"seed", cmd.Int64("seed")}, {"betas", betas}, {"beta", orNull(beta)},
				{"iterations", cmd.Int("iterations")}, {"group", cmd.Int("group")}, {"lr", cmd.Float("lr")},
				{"optimum_beta", cmd.Float("optimum-beta")}, {"trace", cmd.Int("trace")}}
		},
		handCheck: tinylm.HandCheck8,
		run: func(cmd *cli.Command, b backends.Backend) (lmResult, error) {
			betas, err := lmBetas(cmd)
			if err != nil {
				return lmResult{}, err
			}
			res := tinylm.Phase8Result{OptimumBeta: cmd.Float("optimum-beta"), OptimumPCorrect: tinylm.KLOptimum(cmd.Float("optimum-beta"))}
			for _, beta := range betas {
				cfg := tinylm.ReinforceKLConfig{Beta: beta, Iterations: cmd.Int("iterations"), Group: cmd.Int("group"),
					LR: cmd.Float("lr"), Seed: cmd.Int64("seed")}
				if err := cfg.Validate(); err != nil {
					return lmResult{}, usageError{fmt.Errorf("toy %s: %w", cmd.Name, err)}
				}
				var r tinylm.ReinforceKLResult
				if b == nil {
					r = tinylm.RunReinforceKL(cfg)
				} else if r, err = tinylmgomlx.RunReinforceKL(b, cfg); err != nil {
					return lmResult{}, fmt.Errorf("toy %s: %w", cmd.Name, err)
				}
				r.SamplesHead = traced(cmd, r.SamplesHead)
				res.Runs = append(res.Runs, r)
			}
			return lmResult{res, func(w io.Writer) { tinylm.PrintPhase8(w, res) }}, nil
		},
	})
}

// lmBetas is --beta if given, else --betas.
func lmBetas(cmd *cli.Command) ([]float64, error) {
	beta, err := optFloat(cmd, "beta")
	if err != nil || beta != nil {
		return []float64{orZero(beta)}, err
	}
	return parseFloatList(cmd, "betas")
}

func addRLHFToy() {
	d := tinylm.DefaultRLHF()
	addLMToy(lmToy{
		phase: 9, name: "rlhf",
		usage: "Bradley–Terry reward model (식 (9.1)-(9.2)) and PPO with a per-token KL reward (식 (9.3))",
		flags: []cli.Flag{seedFlag(),
			floatFlag("beta", d.Beta, "per-token KL penalty β"),
			intFlag("iterations", d.Iterations, "rollout + PPO iterations"),
			intFlag("group", d.Group, "samples per prompt per iteration"),
			intFlag("epochs", d.Epochs, "PPO passes over each batch"),
			floatFlag("lr", d.LR, "policy learning rate (plain gradient step)"),
			floatFlag("critic-lr", d.CriticLR, "critic table step size"),
			floatFlag("eps", d.Eps, "PPO clip ε"),
			floatFlag("lam", d.Lam, "GAE λ (γ = 1)"),
			intFlag("rm-epochs", d.RMEpochs, "reward-model epochs"),
			floatFlag("rm-lr", d.RMLR, "reward-model learning rate"),
			traceFlag()},
		args: func(cmd *cli.Command) kvs {
			return kvs{{"seed", cmd.Int64("seed")}, {"beta", cmd.Float("beta")}, {"iterations", cmd.Int("iterations")},
				{"group", cmd.Int("group")}, {"epochs", cmd.Int("epochs")}, {"lr", cmd.Float("lr")},
				{"critic_lr", cmd.Float("critic-lr")}, {"eps", cmd.Float("eps")}, {"lam", cmd.Float("lam")},
				{"rm_epochs", cmd.Int("rm-epochs")}, {"rm_lr", cmd.Float("rm-lr")}, {"trace", cmd.Int("trace")}}
		},
		handCheck: tinylm.HandCheck9,
		run: func(cmd *cli.Command, b backends.Backend) (lmResult, error) {
			cfg := tinylm.RLHFConfig{RMEpochs: cmd.Int("rm-epochs"), RMLR: cmd.Float("rm-lr"), Beta: cmd.Float("beta"),
				Iterations: cmd.Int("iterations"), Group: cmd.Int("group"), Epochs: cmd.Int("epochs"), LR: cmd.Float("lr"),
				CriticLR: cmd.Float("critic-lr"), Eps: cmd.Float("eps"), Lam: cmd.Float("lam"), Seed: cmd.Int64("seed")}
			if err := cfg.Validate(); err != nil {
				return lmResult{}, usageError{fmt.Errorf("toy %s: %w", cmd.Name, err)}
			}
			var res tinylm.Phase9Result
			if b == nil {
				res = tinylm.RunRLHF(cfg)
			} else {
				var err error
				if res, err = tinylmgomlx.RunRLHF(b, cfg); err != nil {
					return lmResult{}, fmt.Errorf("toy %s: %w", cmd.Name, err)
				}
			}
			res.SamplesHead = traced(cmd, res.SamplesHead)
			return lmResult{res, func(w io.Writer) { tinylm.PrintRLHF(w, res) }}, nil
		},
	})
}

// prefFlags are phase 10's settings, shared by `toy dpo` and `toy kto` (the course runs both in
// one script; KTO's unset values fall back to DPO's).
func prefFlags() []cli.Flag {
	d := tinylm.DefaultDPO()
	return []cli.Flag{seedFlag(),
		floatFlag("beta", d.Beta, "β of 식 (10.3) (and of KTO unless --kto-beta)"),
		intFlag("epochs", d.Epochs, "full-batch steps (and KTO's unless --kto-epochs)"),
		floatFlag("lr", d.LR, "learning rate of the plain gradient step (and KTO's unless --kto-lr)"),
		optionalFlag("kto-beta", "KTO's β of 식 (10.4) (default: --beta)"),
		optionalFlag("kto-epochs", "KTO's full-batch steps (default: --epochs)"),
		optionalFlag("kto-lr", "KTO's learning rate (default: --lr)")}
}

func prefArgs(cmd *cli.Command) kvs {
	kb, _ := optFloat(cmd, "kto-beta")
	ke, _ := optInt(cmd, "kto-epochs")
	kl, _ := optFloat(cmd, "kto-lr")
	return kvs{{"seed", cmd.Int64("seed")}, {"beta", cmd.Float("beta")}, {"epochs", cmd.Int("epochs")}, {"lr", cmd.Float("lr")},
		{"kto_beta", orNull(kb)}, {"kto_epochs", orNull(ke)}, {"kto_lr", orNull(kl)}}
}

// prefConfig reads DPO's settings, or KTO's (prefix "kto-", falling back to DPO's).
func prefConfig(cmd *cli.Command, kto bool) (tinylm.PrefConfig, error) {
	c := tinylm.PrefConfig{Beta: cmd.Float("beta"), Epochs: cmd.Int("epochs"), LR: cmd.Float("lr")}
	kb, err1 := optFloat(cmd, "kto-beta")
	ke, err2 := optInt(cmd, "kto-epochs")
	kl, err3 := optFloat(cmd, "kto-lr")
	if err := errors.Join(err1, err2, err3); err != nil {
		return c, usageError{err}
	}
	if kto {
		set(&c.Beta, kb)
		set(&c.Epochs, ke)
		set(&c.LR, kl)
	}
	if err := c.Validate(); err != nil {
		return c, usageError{fmt.Errorf("toy %s: %w", cmd.Name, err)}
	}
	return c, nil
}

func addPrefToys() {
	addLMToy(lmToy{
		phase: 10, order: 0, name: "dpo", usage: "DPO on the course's preferences (식 (10.3))",
		flags: prefFlags(), args: prefArgs, handCheck: tinylm.HandCheck10,
		run: func(cmd *cli.Command, b backends.Backend) (lmResult, error) {
			cfg, err := prefConfig(cmd, false)
			if err != nil {
				return lmResult{}, err
			}
			res := tinylm.DPOResult{}
			if b == nil {
				res = tinylm.RunDPO(cfg)
			} else if res, err = tinylmgomlx.RunDPO(b, cfg); err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %w", cmd.Name, err)
			}
			return lmResult{res, func(w io.Writer) { tinylm.PrintDPO(w, res) }}, nil
		},
	})
	addLMToy(lmToy{
		phase: 10, order: 1, name: "kto", usage: "KTO on the course's good/bad labels (식 (10.4))",
		flags: prefFlags(), args: prefArgs,
		run: func(cmd *cli.Command, b backends.Backend) (lmResult, error) {
			cfg, err := prefConfig(cmd, true)
			if err != nil {
				return lmResult{}, err
			}
			res := tinylm.KTOResult{}
			if b == nil {
				res = tinylm.RunKTO(cfg)
			} else if res, err = tinylmgomlx.RunKTO(b, cfg); err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %w", cmd.Name, err)
			}
			return lmResult{res, func(w io.Writer) { tinylm.PrintKTO(w, res) }}, nil
		},
	})
}

// grpoFlags are phases 11-12's settings; the variant flags override the course's cfg when given.
func grpoFlags(iterations int) []cli.Flag {
	d, v := tinylm.DefaultGRPO(), tinylm.DefaultVariant
	dflt := func(x any) string { return fmt.Sprintf(" (default: the variant's; GRPO %v)", x) }
	return []cli.Flag{seedFlag(),
		intFlag("iterations", iterations, "iterations (sample groups, then --epochs passes)"),
		intFlag("num-generations", d.G, "G: responses per prompt"),
		intFlag("epochs", d.Epochs, "passes over each iteration's groups"),
		floatFlag("lr", d.LR, "learning rate, divided by the number of prompts per group step"),
		optionalFlag("beta", "k3 KL coefficient β"+dflt(v.Beta)),
		optionalFlag("adv", "advantage: std (GRPO) | mean (Dr. GRPO) | rloo"+dflt(v.Adv)),
		optionalFlag("agg", "aggregation: seq_mean (grpo) | token_mean (dapo) | const (dr_grpo)"+dflt(v.Agg)),
		optionalFlag("eps-low", "clip ε_low"+dflt(v.EpsLow)),
		optionalFlag("eps-high", "clip ε_high, DAPO 0.28"+dflt(v.EpsHigh)),
		optionalFlag("ratio", "importance ratio: token | sequence (GSPO)"+dflt(v.Ratio)),
		optionalFlag("dynamic", "true: DAPO dynamic sampling, drop groups whose rewards are all equal"+dflt(v.Dynamic)),
		traceFlag()}
}

func grpoArgs(cmd *cli.Command) kvs {
	beta, _ := optFloat(cmd, "beta")
	lo, _ := optFloat(cmd, "eps-low")
	hi, _ := optFloat(cmd, "eps-high")
	dyn, _ := optBool(cmd, "dynamic")
	return kvs{{"seed", cmd.Int64("seed")}, {"iterations", cmd.Int("iterations")}, {"G", cmd.Int("num-generations")},
		{"epochs", cmd.Int("epochs")}, {"lr", cmd.Float("lr")}, {"beta", orNull(beta)},
		{"adv", orNull(optString(cmd, "adv"))}, {"agg", orNull(optString(cmd, "agg"))},
		{"eps_low", orNull(lo)}, {"eps_high", orNull(hi)},
		{"ratio", orNull(optString(cmd, "ratio"))}, {"dynamic", orNull(dyn)}, {"trace", cmd.Int("trace")}}
}

// grpoConfig is the loop settings and base with the variant flags that were given applied.
func grpoConfig(cmd *cli.Command, base tinylm.GRPOVariant) (tinylm.GRPOConfig, error) {
	v := base
	beta, err1 := optFloat(cmd, "beta")
	lo, err2 := optFloat(cmd, "eps-low")
	hi, err3 := optFloat(cmd, "eps-high")
	dyn, err4 := optBool(cmd, "dynamic")
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return tinylm.GRPOConfig{}, usageError{err}
	}
	set(&v.Beta, beta)
	set(&v.EpsLow, lo)
	set(&v.EpsHigh, hi)
	set(&v.Dynamic, dyn)
	if a := optString(cmd, "adv"); a != nil {
		v.Adv = rl.AdvMode(*a)
	}
	if a := optString(cmd, "agg"); a != nil {
		v.Agg = tinylm.Agg(*a)
	}
	if r := optString(cmd, "ratio"); r != nil {
		v.Ratio = tinylm.RatioLevel(*r)
	}
	c := tinylm.GRPOConfig{Variant: v, Iterations: cmd.Int("iterations"), G: cmd.Int("num-generations"),
		Epochs: cmd.Int("epochs"), LR: cmd.Float("lr"), Seed: cmd.Int64("seed")}
	if err := c.Validate(); err != nil {
		return c, usageError{fmt.Errorf("toy %s: %w", cmd.Name, err)}
	}
	return c, nil
}

func addGRPOToys() {
	addLMToy(lmToy{
		phase: 11, name: "grpo", usage: "GRPO with group advantages and a verifier reward (식 (11.1)-(11.2))",
		flags: grpoFlags(tinylm.DefaultGRPO().Iterations), args: grpoArgs, handCheck: tinylm.HandCheck11,
		run: func(cmd *cli.Command, b backends.Backend) (lmResult, error) {
			cfg, err := grpoConfig(cmd, tinylm.DefaultVariant)
			if err != nil {
				return lmResult{}, err
			}
			var res tinylm.Phase11Result
			if b == nil {
				res = tinylm.RunGRPO(cfg)
			} else if res, err = tinylmgomlx.RunGRPO(b, cfg); err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %w", cmd.Name, err)
			}
			res.SamplesHead = traced(cmd, res.SamplesHead)
			return lmResult{res, func(w io.Writer) { tinylm.PrintGRPO(w, res) }}, nil
		},
	})
	names := make([]string, len(tinylm.Variants))
	for i, v := range tinylm.Variants {
		names[i] = v.Name
	}
	addLMToy(lmToy{
		phase: 12, name: "variants", usage: "GRPO, RLOO, Dr. GRPO, DAPO and GSPO side by side (식 (12.1))",
		flags: append(grpoFlags(tinylm.Phase12Iterations), &cli.StringFlag{Name: "variants",
			Value: strings.Join(names, ","), Usage: "comma-separated variants to train, from " + strings.Join(names, ", ")}),
		args: func(cmd *cli.Command) kvs {
			return append(grpoArgs(cmd), kv{"variants", cmd.String("variants")})
		},
		handCheck: tinylm.HandCheck12,
		run:       runVariants,
	})
}

func runVariants(cmd *cli.Command, b backends.Backend) (lmResult, error) {
	res := tinylm.Phase12Result{Iterations: cmd.Int("iterations")}
	for _, name := range strings.Split(cmd.String("variants"), ",") {
		name = strings.TrimSpace(name)
		base, ok := tinylm.VariantByName(name)
		if !ok {
			return lmResult{}, usageError{fmt.Errorf("toy %s: --variants: unknown variant %q", cmd.Name, name)}
		}
		cfg, err := grpoConfig(cmd, base)
		if err != nil {
			return lmResult{}, err
		}
		var r tinylm.VariantResult
		if b == nil {
			r = tinylm.RunVariant(name, cfg.Variant, cfg)
		} else {
			p, head, err := tinylmgomlx.TrainGRPO(b, cfg)
			if err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %s: %w", cmd.Name, name, err)
			}
			r = tinylm.NewVariantResult(name, cfg.Variant, p.LM, p.Ref, head)
		}
		r.SamplesHead = traced(cmd, r.SamplesHead)
		res.Variants = append(res.Variants, r)
	}
	return lmResult{res, func(w io.Writer) { tinylm.PrintVariants(w, res) }}, nil
}
