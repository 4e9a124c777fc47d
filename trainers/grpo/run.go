package grpo

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/extreward"
	"github.com/posttrain/posttrain/data/tools"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Prompt is one prompt of the training set: the text handed to the reward functions (the chat
// template's rendering for conversational data), its token ids, and the dataset's other columns
// (models/encode renders and tokenizes it).
type Prompt = encode.Prompt

// RunOptions are what Run needs besides the configuration: the environment every method's Run
// takes, and the demo's hooks.
type RunOptions struct {
	loop.Env
	OnStep func(StepInfo)
	// Rows, when set, replaces --dataset (the demo passes its own prompt split).
	Rows []data.Row
}

// setupTools is the run's Tools and Environment (nil without tools or an environment): the
// built-in tools and Python functions (a tool worker) named by cfg.Tools, the environment class
// cfg.Environment (an environment worker) or cfg.EnvironmentURL (an OpenEnv server) whose methods
// are tools too, the family's call format,
// the chat template's tool turns (which must be prefix-preserving: checked here on a first
// rendering) and every tool's schema rendered into every prompt. closeTools ends the workers.
func setupTools(cfg *Config, modelType string, txt *encode.Text, stderr io.Writer) (_ *Tools, _ *Environment, closeTools func(), err error) {
	var closers []func()
	closeTools = func() {
		for _, c := range closers {
			c()
		}
	}
	if len(cfg.Tools) == 0 && cfg.Environment == "" && cfg.EnvironmentURL == "" {
		return nil, nil, closeTools, nil
	}
	key := "tools"
	switch {
	case len(cfg.Tools) > 0:
	case cfg.Environment != "":
		key = "environment"
	default:
		key = "environment_url"
	}
	bad := func(err error) (*Tools, *Environment, func(), error) {
		closeTools()
		return nil, nil, func() {}, config.Bad(cfg, key, err.Error())
	}
	if txt.Template == nil {
		return bad(errors.New("the model has no chat template to render the tools and their results with"))
	}
	format, err := tools.FormatOf(modelType, txt.Template.Source)
	if err != nil {
		return bad(err)
	}
	names, specs, err := extreward.ExpandToolSpecs(cfg.Tools, tools.BuiltinNames())
	if err != nil {
		return bad(err)
	}
	timeout := time.Duration(cfg.ToolTimeout * float64(time.Second))
	var py []tools.Tool
	if len(specs) > 0 {
		pt, err := extreward.StartTools(cfg.RewardPython, specs, stderr, timeout)
		if err != nil {
			return bad(err)
		}
		closers = append(closers, func() { _ = pt.Close() })
		for i, name := range pt.Names {
			py = append(py, &tools.Func{FuncName: name, FuncSchema: pt.Schema[i], Run: func(args map[string]any) (string, error) { return pt.Call(i, args) }})
		}
	}
	set, err := tools.Lookup(names, py...)
	if err != nil {
		return bad(err)
	}
	schemas := set.Schemas()
	var env *Environment
	switch {
	case cfg.Environment != "":
		key = "environment"
		pe, err := extreward.StartEnv(cfg.RewardPython, cfg.Environment, stderr, timeout)
		if err != nil {
			return bad(err)
		}
		closers = append(closers, func() { _ = pe.Close() })
		env = &Environment{Env: pe, Name: pe.Name, Methods: pe.Methods, Schemas: pe.Schemas, HasReward: pe.HasReward}
	case cfg.EnvironmentURL != "":
		key = "environment_url"
		oe, err := extreward.DialOpenEnv(cfg.EnvironmentURL, timeout)
		if err != nil {
			return bad(err)
		}
		closers = append(closers, func() { _ = oe.Close() })
		env = &Environment{Env: oe, Name: oe.Name, Methods: []string{extreward.StepTool}, Schemas: []json.RawMessage{oe.Schema}, HasReward: true}
	}
	if env != nil {
		for _, m := range env.Methods {
			if slices.ContainsFunc(set, func(t tools.Tool) bool { return t.Name() == m }) {
				return bad(fmt.Errorf("%s's method %s has the name of a tool", env.Name, m))
			}
		}
		env.Render = func(msgs []chat.Message) (string, []int32, error) {
			text, err := txt.RenderPrompt(msgs)
			if err != nil {
				return "", nil, err
			}
			var ids []int32
			for _, id := range txt.Tokenizer.Encode(text) {
				ids = append(ids, int32(id))
			}
			return text, ids, nil
		}
		schemas = append(schemas, env.Schemas...)
	}
	name := "dummy"
	switch {
	case len(set) > 0:
		name = set[0].Name()
	case env != nil && len(env.Methods) > 0:
		name = env.Methods[0]
	}
	if _, err := txt.ToolSuffix([]chat.Message{encode.ToolMessage(name, "dummy")}); err != nil {
		return bad(err)
	}
	if len(schemas) > 0 {
		txt.PromptTools = schemas
	}
	return &Tools{Set: set, Format: format, Suffix: txt.ToolSuffix, MaxIterations: cfg.MaxToolCallingIterations}, env, closeTools, nil
}

// Run is `posttrain grpo`: it loads the checkpoint in modelDir (HF layout: weights, config,
// tokenizer, chat template), renders and tokenizes the prompts, and trains (Trainer.Train: resuming
// when asked; training_args.yaml, metrics.jsonl, completions.jsonl, the checkpoints and the final
// model in OUTPUT_DIR).
func Run(ctx stdctx.Context, cfg *Config, modelDir string, opts RunOptions) (*loop.Result, error) {
	m, err := trainable.LoadForTraining(modelDir, cfg)
	if err != nil {
		return nil, err
	}
	txt := m.Text
	stop, err := txt.StopIDs(m.Config)
	if err != nil {
		return nil, err
	}
	tt, env, closeTools, err := setupTools(cfg, m.Config.ModelType, txt, opts.Progress)
	if err != nil {
		return nil, err
	}
	defer closeTools()
	prompts, evalPrompts, err := rollout.Prompts(&cfg.Training, opts.Rows, "GRPO", txt)
	if err != nil {
		return nil, err
	}
	modelWeights, funcWeights, urlWeights := SplitRewardWeights(cfg)
	funcs, err := LookupRewards(cfg.RewardFuncs, funcWeights, uint64(cfg.Seed))
	if err != nil {
		return nil, err
	}
	funcs, ext, err := StartExternal(funcs, cfg, urlWeights, nil)
	if err != nil {
		return nil, err
	}
	defer ext.Close()
	var dirs []string
	for _, rm := range cfg.RewardModels {
		d, err := opts.Resolve(ctx, rm)
		if err != nil {
			return nil, fmt.Errorf("reward model: %w", err)
		}
		dirs = append(dirs, d)
	}
	rewards, err := LoadRewardModels(opts.Backend, dirs, modelWeights, cfg.BF16, cfg.PerDeviceTrainBatchSize)
	if err != nil {
		return nil, err
	}
	rewards = append(rewards, funcs...)
	if env != nil && env.HasReward { // TRL: one more reward source, weight 1, the class's name
		rewards = append(rewards, env.reward())
	}
	if len(rewards) == 0 {
		return nil, errors.New("grpo: no reward source: name a reward function (--reward-funcs), a reward model or a reward server, or give an environment whose class defines get_reward")
	}
	if err := checkRewardNames(rewards); err != nil {
		return nil, err
	}
	if err := CheckRewards(cfg.Dataset, prompts, rewards, extreward.State{IsLocalProcessZero: true, IsWorldProcessZero: true}); err != nil {
		return nil, err
	}
	t, err := New(Setup{Config: cfg, Backend: opts.Backend, Model: m, Decoder: txt.Tokenizer, StopIDs: stop,
		Prompts: prompts, EvalPrompts: evalPrompts, Rewards: rewards, Tools: tt, Environment: env, Logger: opts.Logger, Progress: opts.Progress, OnStep: opts.OnStep})
	if err != nil {
		return nil, err
	}
	return t.Train(ctx)
}
