// Package schedule computes learning-rate schedules exactly as HF transformers' get_scheduler
// (optimization.py) does for the four types posttrain supports: linear, cosine, constant and
// constant_with_warmup, each a LambdaLR multiplier applied to the base learning rate.
//
// Step convention (HF's LambdaLR): Multiplier(k) is the factor after k calls to scheduler.step(),
// i.e. the optimizer update number k+1 (1-based) uses LR(k). HF's Trainer logs
// `learning_rate` after stepping the scheduler, so the metrics line of global step s shows LR(s).
package schedule

import (
	"fmt"
	"math"
)

// Type is a scheduler name as in HF's SchedulerType.
type Type string

// The supported schedule types (HF names).
const (
	Linear             Type = "linear"
	Cosine             Type = "cosine"
	Constant           Type = "constant"
	ConstantWithWarmup Type = "constant_with_warmup"
)

// Types lists the supported schedule types, in the order the CLI shows them.
var Types = []Type{Linear, Cosine, Constant, ConstantWithWarmup}

// Schedule is a learning-rate schedule over a fixed number of optimizer steps.
type Schedule struct {
	Type        Type
	BaseLR      float64
	WarmupSteps int // resolved with WarmupSteps(), not the raw ratio
	TotalSteps  int // num_training_steps
}

// New checks the type and step counts and returns the schedule. warmupSteps is the resolved count
// (see WarmupSteps).
func New(typ Type, baseLR float64, warmupSteps, totalSteps int) (Schedule, error) {
	switch typ {
	case Linear, Cosine, Constant, ConstantWithWarmup:
	default:
		return Schedule{}, fmt.Errorf("lr scheduler %q: unknown type; valid: linear, cosine, constant, constant_with_warmup", typ)
	}
	if warmupSteps < 0 || totalSteps < 0 {
		return Schedule{}, fmt.Errorf("lr scheduler %q: negative steps (warmup %d, total %d)", typ, warmupSteps, totalSteps)
	}
	return Schedule{Type: typ, BaseLR: baseLR, WarmupSteps: warmupSteps, TotalSteps: totalSteps}, nil
}

// WarmupSteps is TrainingArguments.get_warmup_steps: warmup_steps if > 0, else
// ceil(warmup_ratio · total).
func WarmupSteps(warmupSteps int, warmupRatio float64, totalSteps int) int {
	if warmupSteps > 0 {
		return warmupSteps
	}
	return int(math.Ceil(float64(totalSteps) * warmupRatio))
}

// LR returns BaseLR · Multiplier(step).
func (s Schedule) LR(step int) float64 { return s.BaseLR * s.Multiplier(step) }

// Multiplier returns the LambdaLR factor after `step` scheduler steps:
//
//	warmup (step < W, all but constant):  step / max(1, W)
//	linear:   max(0, (T − step) / max(1, T − W))
//	cosine:   max(0, ½·(1 + cos(π · 2·0.5 · p))),  p = (step − W) / max(1, T − W)
//	constant: 1
func (s Schedule) Multiplier(step int) float64 {
	w, t := s.WarmupSteps, s.TotalSteps
	if s.Type == Constant {
		return 1
	}
	if step < w {
		return float64(step) / float64(max(1, w))
	}
	switch s.Type {
	case Linear:
		return math.Max(0, float64(t-step)/float64(max(1, t-w)))
	case Cosine:
		const numCycles = 0.5
		p := float64(step-w) / float64(max(1, t-w))
		return math.Max(0, 0.5*(1+math.Cos(math.Pi*numCycles*2*p)))
	default: // ConstantWithWarmup
		return 1
	}
}
