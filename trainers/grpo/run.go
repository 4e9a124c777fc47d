package grpo

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/config"
	"github.com/posttrain/posttrain/trainers/loop"
)

// MultDataset is the --dataset value that generates the course's multiplication prompts
// (data/mult, kind grpo: prompt plus an "answer" column) instead of reading a file.
const MultDataset = "mult"

// MultRows and MultSeed size the generated multiplication dataset (make_dataset(n, seed)).
const (
	MultRows = 512
	MultSeed = 0
)

// Encoder turns text into ids (data/tokenizer's BPE).
type Encoder interface{ Encode(text string) []int }

// PromptsFromRows renders prompt-only rows as TRL does (conversational prompts through the chat
// template with add_generation_prompt; standard prompts as they are) and tokenizes them. The
// rendered text is what the reward functions receive as the prompt; the other keys of a row are
// its columns.
func PromptsFromRows(rows []data.Row, tpl *chat.Template, enc Encoder) ([]*Prompt, error) {
	out := make([]*Prompt, 0, len(rows))
	for i, r := range rows {
		text := r.Prompt.String
		if r.Prompt.Conversational() {
			if tpl == nil {
				return nil, errors.New("conversational prompts need a chat template, and the model has none")
			}
			var err error
			if text, err = tpl.Render(r.Prompt.Messages, chat.Options{AddGenerationPrompt: true}); err != nil {
				return nil, fmt.Errorf("row %d: %w", i+1, err)
			}
		}
		ids := enc.Encode(text)
		if len(ids) == 0 {
			return nil, fmt.Errorf("row %d: the prompt is empty", i+1)
		}
		p := &Prompt{Text: text, Columns: r.Columns, IDs: make([]int32, len(ids))}
		for j, id := range ids {
			p.IDs[j] = int32(id)
		}
		out = append(out, p)
	}
	return out, nil
}

// LoadRows returns the prompt-only rows of --dataset: "mult" or a JSONL/JSON file.
func LoadRows(dataset string) ([]data.Row, error) {
	if dataset == MultDataset {
		_, rows, err := mult.Rows(mult.GRPO, MultRows, MultSeed)
		return rows, err
	}
	d, err := data.ReadFile(dataset, data.FormatAuto)
	if err != nil {
		return nil, err
	}
	if d.Format != data.PromptOnly {
		return nil, fmt.Errorf("%s: GRPO needs prompt-only rows (a \"prompt\" and optional columns), got %s", dataset, d.Format)
	}
	return d.Rows, nil
}

// StopIDs are every end-of-sequence id of a checkpoint: config.json's and generation_config.json's
// eos_token_id (qwen2.EOSTokenIDs) and tokenizer_config.json's eos_token (TRL #7039: honour them
// all, e.g. Qwen's <|im_end|> and <|endoftext|>).
func StopIDs(dir string, cfg *qwen2.Config, tok *tokenizer.BPE) ([]int, error) {
	ids, err := qwen2.EOSTokenIDs(dir, cfg)
	if err != nil {
		return nil, err
	}
	if eos := tok.Config().EOSToken; eos != "" {
		if id, ok := tok.TokenToID(eos); ok && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("%s: no end-of-sequence id (eos_token_id in config.json or generation_config.json, eos_token in tokenizer_config.json)", dir)
	}
	return ids, nil
}

// RunOptions are what Run needs besides the configuration.
type RunOptions struct {
	Backend  backends.Backend
	Logger   *slog.Logger
	Progress io.Writer
	OnStep   func(StepInfo)
	// Rows, when set, replaces --dataset (the demo passes its own prompt split).
	Rows []data.Row
}

// Run is `posttrain grpo`: it loads the checkpoint in modelDir (HF layout: weights, config,
// tokenizer, chat template), renders and tokenizes the prompts, and trains (Trainer.Train: resuming
// when asked; training_args.yaml, metrics.jsonl, completions.jsonl, the checkpoints and the final
// model in OUTPUT_DIR).
func Run(ctx stdctx.Context, cfg *config.GRPO, modelDir string, opts RunOptions) (*loop.Result, error) {
	m, err := loop.LoadModel(modelDir, cfg.BF16)
	if err != nil {
		return nil, err
	}
	mcfg, tok, tpl := m.Config, m.Tokenizer, m.Template
	stop, err := StopIDs(modelDir, mcfg, tok)
	if err != nil {
		return nil, err
	}
	rows := opts.Rows
	if rows == nil {
		if rows, err = LoadRows(cfg.Dataset); err != nil {
			return nil, err
		}
	}
	prompts, err := PromptsFromRows(rows, tpl, tok)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.Dataset, err)
	}
	evalPrompts, err := loadEvalPrompts(cfg, tpl, tok)
	if err != nil {
		return nil, err
	}
	rewards, err := LookupRewards(cfg.RewardFuncs, cfg.RewardWeights)
	if err != nil {
		return nil, err
	}
	t, err := New(Setup{Config: cfg, Backend: opts.Backend, Model: m, Decoder: tok, StopIDs: stop,
		Prompts: prompts, EvalPrompts: evalPrompts, Rewards: rewards, Logger: opts.Logger, Progress: opts.Progress, OnStep: opts.OnStep})
	if err != nil {
		return nil, err
	}
	return t.Train(ctx)
}

// loadEvalPrompts reads eval_dataset ("mult" or a prompt-only file) through the training prompts'
// path (chat template, tokenizer) when the run evaluates; like loop.WithEvalData (and TRL's scripts,
// which pass no eval split with eval_strategy "no") it does not read it otherwise.
func loadEvalPrompts(cfg *config.GRPO, tpl *chat.Template, tok Encoder) ([]*Prompt, error) {
	if cfg.EvalDataset == "" || !cfg.Evaluates() {
		return nil, nil
	}
	rows, err := LoadRows(cfg.EvalDataset)
	if err != nil {
		return nil, fmt.Errorf("eval_dataset: %w", err)
	}
	prompts, err := PromptsFromRows(rows, tpl, tok)
	if err != nil {
		return nil, fmt.Errorf("eval_dataset: %s: %w", cfg.EvalDataset, err)
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("eval_dataset: %s: no prompts", cfg.EvalDataset)
	}
	return prompts, nil
}
