package main

// The six TinyLM experiments (phases 8-12). Each setting is declared once, as a toyParam bound to
// a field of the experiment's settings: the flag is the golden's "args" key in kebab-case (unless
// renamed), defaulting to the course's value.

import (
	"fmt"
	"io"
	"strings"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/toy/tinylm"
	"github.com/posttrain/posttrain/toy/tinylmgomlx"
	"github.com/posttrain/posttrain/trainers/engine/rl"
)

func init() {
	addLMReinforceToy()
	addRLHFToy()
	addPrefToys()
	addGRPOToys()
}

// lmUsage is a usage error of toy name's settings.
func lmUsage(name string, err error) error { return usageError{fmt.Errorf("toy %s: %w", name, err)} }

// reinforceSettings are phase 8's: one run per β of Betas (or Beta alone) with the loop settings
// of Config (its Beta set per run).
type reinforceSettings struct {
	Config      tinylm.ReinforceKLConfig
	Betas       string   // comma-separated, parsed only when Beta is not given
	Beta        *float64 // a single β instead of Betas
	OptimumBeta float64
	Trace       int
}

func addLMReinforceToy() {
	addLMToy(lmToy[reinforceSettings]{
		phase: 8, name: "lm-reinforce",
		usage: "sequence REINFORCE with a KL penalty R − β·log π/π_ref (식 (8.3)-(8.5))",
		defaults: func() reinforceSettings {
			return reinforceSettings{Config: tinylm.DefaultReinforceKL(0), Betas: "0.0,0.5", OptimumBeta: tinylm.Phase8OptimumBeta,
				Trace: tinylm.TraceLen}
		},
		params: func(s *reinforceSettings) []toyParam {
			return []toyParam{seedVar(&s.Config.Seed),
				floatListTextVar(&s.Betas, "betas", "comma-separated KL coefficients β, one run each"),
				optFloatVar(&s.Beta, "beta", "a single β instead of --betas"),
				intVar(&s.Config.Iterations, "iterations", "iterations (one update each)"),
				intVar(&s.Config.Group, "group", "samples per prompt per iteration"),
				floatVar(&s.Config.LR, "lr", "learning rate of the plain gradient step"),
				floatVar(&s.OptimumBeta, "optimum-beta", "β of the printed KL-regularised optimum (식 (8.5))"),
				traceVar(&s.Trace)}
		},
		handCheck: tinylm.HandCheck8,
		run: func(name string, s reinforceSettings, b backends.Backend) (lmResult, error) {
			betas := []float64{orZero(s.Beta)}
			if s.Beta == nil {
				var err error
				if betas, err = parseFloats(name, "betas", s.Betas); err != nil {
					return lmResult{}, err
				}
			}
			res := tinylm.Phase8Result{OptimumBeta: s.OptimumBeta, OptimumPCorrect: tinylm.KLOptimum(s.OptimumBeta)}
			for _, beta := range betas {
				cfg := s.Config
				cfg.Beta = beta
				if err := cfg.Validate(); err != nil {
					return lmResult{}, lmUsage(name, err)
				}
				var r tinylm.ReinforceKLResult
				var err error
				if b == nil {
					r = tinylm.RunReinforceKL(cfg)
				} else if r, err = tinylmgomlx.RunReinforceKL(b, cfg); err != nil {
					return lmResult{}, fmt.Errorf("toy %s: %w", name, err)
				}
				r.SamplesHead = traced(s.Trace, r.SamplesHead)
				res.Runs = append(res.Runs, r)
			}
			return lmResult{res, func(w io.Writer) { tinylm.PrintPhase8(w, res) }}, nil
		},
	})
}

// rlhfSettings are phase 9's.
type rlhfSettings struct {
	Config tinylm.RLHFConfig
	Trace  int
}

func addRLHFToy() {
	addLMToy(lmToy[rlhfSettings]{
		phase: 9, name: "rlhf",
		usage:    "Bradley–Terry reward model (식 (9.1)-(9.2)) and PPO with a per-token KL reward (식 (9.3))",
		defaults: func() rlhfSettings { return rlhfSettings{Config: tinylm.DefaultRLHF(), Trace: tinylm.TraceLen} },
		params: func(s *rlhfSettings) []toyParam {
			c := &s.Config
			return []toyParam{seedVar(&c.Seed),
				floatVar(&c.Beta, "beta", "per-token KL penalty β"),
				intVar(&c.Iterations, "iterations", "rollout + PPO iterations"),
				intVar(&c.Group, "group", "samples per prompt per iteration"),
				intVar(&c.Epochs, "epochs", "PPO passes over each batch"),
				floatVar(&c.LR, "lr", "policy learning rate (plain gradient step)"),
				floatVar(&c.CriticLR, "critic-lr", "critic table step size"),
				floatVar(&c.Eps, "eps", "PPO clip ε"),
				floatVar(&c.Lam, "lam", "GAE λ (γ = 1)"),
				intVar(&c.RMEpochs, "rm-epochs", "reward-model epochs"),
				floatVar(&c.RMLR, "rm-lr", "reward-model learning rate"),
				traceVar(&s.Trace)}
		},
		handCheck: tinylm.HandCheck9,
		run: func(name string, s rlhfSettings, b backends.Backend) (lmResult, error) {
			if err := s.Config.Validate(); err != nil {
				return lmResult{}, lmUsage(name, err)
			}
			var res tinylm.Phase9Result
			if b == nil {
				res = tinylm.RunRLHF(s.Config)
			} else {
				var err error
				if res, err = tinylmgomlx.RunRLHF(b, s.Config); err != nil {
					return lmResult{}, fmt.Errorf("toy %s: %w", name, err)
				}
			}
			res.SamplesHead = traced(s.Trace, res.SamplesHead)
			return lmResult{res, func(w io.Writer) { tinylm.PrintRLHF(w, res) }}, nil
		},
	})
}

// prefSettings are phase 10's, shared by `toy dpo` and `toy kto` (the course runs both in one
// script; KTO's unset values fall back to DPO's). The seed is only reported: the runs draw nothing.
type prefSettings struct {
	Seed           int64
	Config         tinylm.PrefConfig // DPO's, and KTO's where KTO's own is not given
	KTOBeta, KTOLR *float64
	KTOEpochs      *int
}

func prefDefaults() prefSettings { return prefSettings{Config: tinylm.DefaultDPO()} }

func prefParams(s *prefSettings) []toyParam {
	return []toyParam{seedVar(&s.Seed),
		floatVar(&s.Config.Beta, "beta", "β of 식 (10.3) (and of KTO unless --kto-beta)"),
		intVar(&s.Config.Epochs, "epochs", "full-batch steps (and KTO's unless --kto-epochs)"),
		floatVar(&s.Config.LR, "lr", "learning rate of the plain gradient step (and KTO's unless --kto-lr)"),
		optFloatVar(&s.KTOBeta, "kto-beta", "KTO's β of 식 (10.4) (default: --beta)"),
		optIntVar(&s.KTOEpochs, "kto-epochs", "KTO's full-batch steps (default: --epochs)"),
		optFloatVar(&s.KTOLR, "kto-lr", "KTO's learning rate (default: --lr)")}
}

// config is DPO's settings, or KTO's (its own where given, DPO's otherwise), validated.
func (s prefSettings) config(name string, kto bool) (tinylm.PrefConfig, error) {
	c := s.Config
	if kto {
		set(&c.Beta, s.KTOBeta)
		set(&c.Epochs, s.KTOEpochs)
		set(&c.LR, s.KTOLR)
	}
	if err := c.Validate(); err != nil {
		return c, lmUsage(name, err)
	}
	return c, nil
}

func addPrefToys() {
	addLMToy(lmToy[prefSettings]{
		phase: 10, order: 0, name: "dpo", usage: "DPO on the course's preferences (식 (10.3))",
		defaults: prefDefaults, params: prefParams, handCheck: tinylm.HandCheck10,
		run: func(name string, s prefSettings, b backends.Backend) (lmResult, error) {
			cfg, err := s.config(name, false)
			if err != nil {
				return lmResult{}, err
			}
			res := tinylm.DPOResult{}
			if b == nil {
				res = tinylm.RunDPO(cfg)
			} else if res, err = tinylmgomlx.RunDPO(b, cfg); err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %w", name, err)
			}
			return lmResult{res, func(w io.Writer) { tinylm.PrintDPO(w, res) }}, nil
		},
	})
	addLMToy(lmToy[prefSettings]{
		phase: 10, order: 1, name: "kto", usage: "KTO on the course's good/bad labels (식 (10.4))",
		defaults: prefDefaults, params: prefParams,
		run: func(name string, s prefSettings, b backends.Backend) (lmResult, error) {
			cfg, err := s.config(name, true)
			if err != nil {
				return lmResult{}, err
			}
			res := tinylm.KTOResult{}
			if b == nil {
				res = tinylm.RunKTO(cfg)
			} else if res, err = tinylmgomlx.RunKTO(b, cfg); err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %w", name, err)
			}
			return lmResult{res, func(w io.Writer) { tinylm.PrintKTO(w, res) }}, nil
		},
	})
}

// grpoSettings are phases 11-12's: the loop settings of Config (its Variant the experiment's
// base), and the variant settings that override the base's when given.
type grpoSettings struct {
	Config                tinylm.GRPOConfig
	Beta, EpsLow, EpsHigh *float64
	Adv, Agg, Ratio       *string
	Dynamic               *bool
	Trace                 int
	Variants              string // phase 12: comma-separated variant names
}

func grpoDefaults(iterations int) func() grpoSettings {
	return func() grpoSettings {
		c := tinylm.DefaultGRPO()
		c.Iterations = iterations
		return grpoSettings{Config: c, Trace: tinylm.TraceLen, Variants: strings.Join(variantNames(), ",")}
	}
}

// variantNames are phase 12's variants, in the course's order.
func variantNames() []string {
	names := make([]string, len(tinylm.Variants))
	for i, v := range tinylm.Variants {
		names[i] = v.Name
	}
	return names
}

func grpoParams(s *grpoSettings) []toyParam {
	v := tinylm.DefaultVariant
	dflt := func(x any) string { return fmt.Sprintf(" (default: the variant's; GRPO %v)", x) }
	c := &s.Config
	return []toyParam{seedVar(&c.Seed),
		intVar(&c.Iterations, "iterations", "iterations (sample groups, then --epochs passes)"),
		intVar(&c.G, "num-generations", "G: responses per prompt").as("G"),
		intVar(&c.Epochs, "epochs", "passes over each iteration's groups"),
		floatVar(&c.LR, "lr", "learning rate, divided by the number of prompts per group step"),
		optFloatVar(&s.Beta, "beta", "k3 KL coefficient β"+dflt(v.Beta)),
		optStringVar(&s.Adv, "adv", "advantage: std (GRPO) | mean (Dr. GRPO) | rloo"+dflt(v.Adv)),
		optStringVar(&s.Agg, "agg", "aggregation: seq_mean (grpo) | token_mean (dapo) | const (dr_grpo)"+dflt(v.Agg)),
		optFloatVar(&s.EpsLow, "eps-low", "clip ε_low"+dflt(v.EpsLow)),
		optFloatVar(&s.EpsHigh, "eps-high", "clip ε_high, DAPO 0.28"+dflt(v.EpsHigh)),
		optStringVar(&s.Ratio, "ratio", "importance ratio: token | sequence (GSPO)"+dflt(v.Ratio)),
		optBoolVar(&s.Dynamic, "dynamic", "true: DAPO dynamic sampling, drop groups whose rewards are all equal"+dflt(v.Dynamic)),
		traceVar(&s.Trace)}
}

// config is the loop settings with base and the variant settings that were given applied.
func (s grpoSettings) config(name string, base tinylm.GRPOVariant) (tinylm.GRPOConfig, error) {
	v := base
	set(&v.Beta, s.Beta)
	set(&v.EpsLow, s.EpsLow)
	set(&v.EpsHigh, s.EpsHigh)
	set(&v.Dynamic, s.Dynamic)
	if s.Adv != nil {
		v.Adv = rl.AdvMode(*s.Adv)
	}
	if s.Agg != nil {
		v.Agg = tinylm.Agg(*s.Agg)
	}
	if s.Ratio != nil {
		v.Ratio = tinylm.RatioLevel(*s.Ratio)
	}
	c := s.Config
	c.Variant = v
	if err := c.Validate(); err != nil {
		return c, lmUsage(name, err)
	}
	return c, nil
}

func addGRPOToys() {
	addLMToy(lmToy[grpoSettings]{
		phase: 11, name: "grpo", usage: "GRPO with group advantages and a verifier reward (식 (11.1)-(11.2))",
		defaults: grpoDefaults(tinylm.DefaultGRPO().Iterations), params: grpoParams, handCheck: tinylm.HandCheck11,
		run: func(name string, s grpoSettings, b backends.Backend) (lmResult, error) {
			cfg, err := s.config(name, tinylm.DefaultVariant)
			if err != nil {
				return lmResult{}, err
			}
			var res tinylm.Phase11Result
			if b == nil {
				res = tinylm.RunGRPO(cfg)
			} else if res, err = tinylmgomlx.RunGRPO(b, cfg); err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %w", name, err)
			}
			res.SamplesHead = traced(s.Trace, res.SamplesHead)
			return lmResult{res, func(w io.Writer) { tinylm.PrintGRPO(w, res) }}, nil
		},
	})
	addLMToy(lmToy[grpoSettings]{
		phase: 12, name: "variants", usage: "GRPO, RLOO, Dr. GRPO, DAPO and GSPO side by side (식 (12.1))",
		defaults: grpoDefaults(tinylm.Phase12Iterations),
		params: func(s *grpoSettings) []toyParam {
			return append(grpoParams(s), stringVar(&s.Variants, "variants",
				"comma-separated variants to train, from "+strings.Join(variantNames(), ", ")))
		},
		handCheck: tinylm.HandCheck12,
		run:       runVariants,
	})
}

func runVariants(name string, s grpoSettings, b backends.Backend) (lmResult, error) {
	res := tinylm.Phase12Result{Iterations: s.Config.Iterations}
	for _, v := range strings.Split(s.Variants, ",") {
		v = strings.TrimSpace(v)
		base, ok := tinylm.VariantByName(v)
		if !ok {
			return lmResult{}, lmUsage(name, fmt.Errorf("--variants: unknown variant %q", v))
		}
		cfg, err := s.config(name, base)
		if err != nil {
			return lmResult{}, err
		}
		var r tinylm.VariantResult
		if b == nil {
			r = tinylm.RunVariant(v, cfg.Variant, cfg)
		} else {
			p, head, err := tinylmgomlx.TrainGRPO(b, cfg)
			if err != nil {
				return lmResult{}, fmt.Errorf("toy %s: %s: %w", name, v, err)
			}
			r = tinylm.NewVariantResult(v, cfg.Variant, p.LM, p.Ref, head)
		}
		r.SamplesHead = traced(s.Trace, r.SamplesHead)
		res.Variants = append(res.Variants, r)
	}
	return lmResult{res, func(w io.Writer) { tinylm.PrintVariants(w, res) }}, nil
}
