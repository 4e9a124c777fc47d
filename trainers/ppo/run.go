package ppo

import (
	stdctx "context"
	"errors"
	"fmt"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// RunOptions are what Run needs besides the configuration: the environment every method's Run
// takes, and the demo's hooks (shaped like grpo.RunOptions).
type RunOptions struct {
	loop.Env
	OnUpdate func(UpdateInfo)
	// Rows, when set, replaces --dataset (the demo passes its own prompt split).
	Rows []data.Row
}

// Run is `posttrain ppo`: it loads the policy from modelDir, the value model (value_model_path,
// by default the reward model's checkpoint, as TRL's ppo.py) beside it in the same optimizer, the
// frozen reward model, renders and tokenizes the prompts, and trains (Trainer.Train).
func Run(ctx stdctx.Context, cfg *Config, modelDir string, opts RunOptions) (*loop.Result, error) {
	t, err := Load(ctx, cfg, modelDir, opts)
	if err != nil {
		return nil, err
	}
	return t.Train(ctx)
}

// Load is Run's setup without the training: the models, the prompts and the compiled graphs.
func Load(ctx stdctx.Context, cfg *Config, modelDir string, opts RunOptions) (*Trainer, error) {
	if cfg.UsePEFT {
		return nil, errNoPEFT
	}
	rmDir, err := opts.Resolve(ctx, cfg.RewardModelPath)
	if err != nil {
		return nil, fmt.Errorf("reward model: %w", err)
	}
	vmDir, err := opts.Resolve(ctx, cfg.ValueModelPath)
	if err != nil {
		return nil, fmt.Errorf("value model: %w", err)
	}
	m, err := trainable.LoadModel(modelDir, cfg.BF16)
	if err != nil {
		return nil, err
	}
	value, fresh, err := trainable.LoadClassifier(vmDir, false, 1, uint64(cfg.Seed))
	if err != nil {
		return nil, fmt.Errorf("value model: %w", err)
	}
	if fresh {
		opts.Log().Info("ppo: the value model's checkpoint is a causal LM: its LM head is dropped and a new score head drawn (AutoModelForSequenceClassification, num_labels 1)", "value_model_path", vmDir)
	}
	if err := SameVocabulary(m.Text, value.Text, modelDir, vmDir); err != nil {
		return nil, fmt.Errorf("value model: %w", err)
	}
	if err := m.AttachValue(value); err != nil {
		return nil, err
	}
	reward, err := trainable.LoadScorer(opts.Backend, rmDir, cfg.BF16, cfg.LocalRolloutForwardBatchSize)
	if err != nil {
		return nil, err
	}
	if err := SameVocabulary(m.Text, reward.Model.Text, modelDir, rmDir); err != nil {
		return nil, fmt.Errorf("reward model: %w", err)
	}
	txt := m.Text
	pad, err := txt.PadTokenID("")
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", modelDir, err)
	}
	_, eos, err := txt.EOS()
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", modelDir, err)
	}
	prompts, evalPrompts, err := rollout.Prompts(&cfg.Training, opts.Rows, "PPO", txt)
	if err != nil {
		return nil, err
	}
	return New(Setup{Config: cfg, Backend: opts.Backend, Model: m, Reward: reward, Decoder: txt.Tokenizer, Pad: pad, EOS: eos,
		Prompts: prompts, EvalPrompts: evalPrompts, Logger: opts.Logger, Progress: opts.Progress, OnUpdate: opts.OnUpdate})
}

// errNoPEFT refuses use_peft: TRL's PPOTrainer trains a LoRA policy with the reference as the
// adapter disabled, but posttrain's LoRA hooks would also reach the value model's forward pass in
// the shared context, so PPO trains every weight.
var errNoPEFT = errors.New("use_peft (--use-peft) is not supported by ppo: the policy and the value model are trained in full (docs/reward-ppo.md)")

// SameVocabulary refuses a reward or value model whose tokenizer is not the policy's: TRL feeds
// the policy's token ids to both models unchanged, so every id must mean the same token.
func SameVocabulary(policy, other *encode.Text, policyDir, otherDir string) error {
	a, b := policy.Tokenizer, other.Tokenizer
	if a.VocabSize() != b.VocabSize() {
		return fmt.Errorf("%s has a vocabulary of %d tokens, the policy %s %d: PPO feeds the policy's token ids to it, so both must share one tokenizer",
			otherDir, b.VocabSize(), policyDir, a.VocabSize())
	}
	for id := range a.VocabSize() {
		x, _ := a.IDToToken(id)
		y, _ := b.IDToToken(id)
		if x != y {
			return fmt.Errorf("token id %d is %q for the policy %s but %q for %s: PPO feeds the policy's token ids to it, so both must share one tokenizer",
				id, x, policyDir, y, otherDir)
		}
	}
	return nil
}

// Prompts are the training prompts in the dataset's order.
func (t *Trainer) Prompts() []*Prompt { return t.s.Prompts }
