// Package rollout is what GRPO and PPO share between their prompts and their losses, as TRL's
// GRPOTrainer and PPOTrainer do: the prompt-only rows and the eval prompts, the seeded prompt
// cursor, the generation call, the layout of prompt+completion rows (Layout, Sequences), the
// completion log-probs read from it, the sampled rows themselves (Rollout) and the cutting of a
// rollout into micro-batches (Chunks).
// What the two trainers really do differently is a parameter here: drop_last in the cursor, the
// sampler options and the rows per generation call, and the layout's padding (GRPO's pads by
// length with id 0 and HF's positions, PPO's attention = ids ≠ pad_token_id with the exclusive
// cumsum). PPO's values, its truncation at the stop token and its rewards at the last non-pad
// token stay in trainers/ppo, on top of these.
package rollout

import (
	"fmt"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// Rollout is a batch of sampled completions as GRPO and PPO both keep it: one row per completion
// (GRPO's: a prompt's num_generations rows consecutive), with its prompt, the generated ids (the
// stop token included when one ended the row), the sampler's log-probs of them (tempered, over
// the whole vocabulary: models/generate) and whether the row reached the token limit without a
// stop token. Each trainer's rollout embeds it and adds what its loss needs (grpo.Scored: the
// rewards, group advantages and loss mask; ppo.Scored: the padded layout, values, per-token
// rewards and GAE).
type Rollout struct {
	Prompts     []*encode.Prompt
	Completions [][]int32
	SampledLogp [][]float64
	Truncated   []bool
}

// New is the rollout of gens, the generations of prompts (one each, in order).
func New(prompts []*encode.Prompt, gens []generate.Generation) Rollout {
	r := Rollout{Prompts: prompts}
	for _, g := range gens {
		r.Completions = append(r.Completions, g.IDs)
		r.SampledLogp = append(r.SampledLogp, g.LogProbs)
		r.Truncated = append(r.Truncated, g.Truncated)
	}
	return r
}

// Len is the number of rows.
func (r *Rollout) Len() int { return len(r.Completions) }

// Prompts are a run's training and eval prompts, rendered and tokenized by txt: rows (the demo's
// own split) or else the dataset's prompt-only rows (LoadRows), and eval_dataset's when the run
// evaluates (EvalPrompts; an eval set without prompts is an error). method names the trainer in
// the errors ("GRPO", "PPO").
func Prompts(c *config.Training, rows []data.Row, method string, txt *encode.Text) (train, eval []*encode.Prompt, err error) {
	if rows == nil && len(c.Datasets) > 0 { // TRL's mixture, in place of dataset_name
		d, err := data.ReadMixture(c.Datasets, data.ReadOptions{Format: data.FormatAuto})
		if err != nil {
			return nil, nil, err
		}
		if rows, err = promptRows(d, "datasets", method); err != nil {
			return nil, nil, err
		}
	}
	if rows == nil {
		if rows, err = LoadRows(c.Dataset, data.ReadOptions{Split: c.DatasetTrainSplit, Config: c.DatasetConfig}, method); err != nil {
			return nil, nil, err
		}
	}
	if train, err = txt.Prompts(rows); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.Dataset, err)
	}
	evalPath, split := c.EvalSource()
	read := data.ReadOptions{Split: split}
	if evalPath == c.Dataset {
		read.Config = c.DatasetConfig
	}
	eval, err = EvalPrompts(evalPath, read, c.Evaluates(), method, txt)
	if err == nil && len(eval) == 0 && c.Evaluates() {
		err = fmt.Errorf("eval_dataset: %s: no prompts", evalPath)
	}
	if err != nil {
		return nil, nil, err
	}
	return train, eval, nil
}

// LoadRows returns the prompt-only rows of a dataset: a registered source (e.g. "mult",
// data/mult) or data with a "prompt" column (standard or conversational, TRL's prompt-only
// format; the prompts of prompt-completion rows, as TRL's GRPOTrainer takes them). method names the trainer in the error ("GRPO", "PPO").
func LoadRows(dataset string, read data.ReadOptions, method string) ([]data.Row, error) {
	d, err := data.OpenWith(dataset, data.PromptOnly, read)
	if err != nil {
		return nil, err
	}
	return promptRows(d, dataset, method)
}

// promptRows are the prompt-only rows of d (read as dataset), or an error naming method.
func promptRows(d *data.Dataset, dataset, method string) ([]data.Row, error) {
	switch d.Format {
	case data.PromptOnly:
	case data.PromptCompletion:
		// TRL's GRPOTrainer samples from the prompts of any dataset with a "prompt" column; a
		// completion column is left out of the reward functions' arguments, as there
		// (trl-lib/tldr, its quick start's dataset, is prompt-completion).
		rows := make([]data.Row, len(d.Rows))
		for i, r := range d.Rows {
			rows[i] = data.Row{Line: r.Line, Prompt: r.Prompt, Columns: r.Columns, Tools: r.Tools}
		}
		return rows, nil
	default:
		return nil, fmt.Errorf("%s: %s needs prompt-only rows (a \"prompt\" and optional columns), got %s", dataset, method, d.Format)
	}
	return d.Rows, nil
}

// EvalPrompts reads eval_dataset through the training prompts' path (chat template, tokenizer)
// when the run evaluates; like loop.WithEvalData (and TRL's scripts, which pass no eval split
// with eval_strategy "no") it reads nothing otherwise.
func EvalPrompts(dataset string, read data.ReadOptions, evaluates bool, method string, txt *encode.Text) ([]*encode.Prompt, error) {
	if dataset == "" || !evaluates {
		return nil, nil
	}
	rows, err := LoadRows(dataset, read, method)
	if err != nil {
		return nil, fmt.Errorf("eval_dataset: %w", err)
	}
	prompts, err := txt.Prompts(rows)
	if err != nil {
		return nil, fmt.Errorf("eval_dataset: %s: %w", dataset, err)
	}
	return prompts, nil
}

// Cursor is the position in the training prompts: a per-epoch order shuffled from the run's
// seed (loop.Order), Offset prompts into epoch Epoch. Both are what a checkpoint saves.
type Cursor struct {
	Epoch, Offset int
	n, seed       int
	order         []int // the current epoch's order; nil: not drawn yet (a new or resumed run)
}

// NewCursor is the cursor at the start of n prompts' first epoch.
func NewCursor(n, seed int) *Cursor { return &Cursor{n: n, seed: seed} }

// Seek moves the cursor to a saved position.
func (c *Cursor) Seek(epoch, offset int) { c.Epoch, c.Offset, c.order = epoch, offset, nil }

// Save writes the cursor into a checkpoint's trainer_state.json: the data position and the seed
// of the prompt order.
func (c *Cursor) Save(st *checkpoint.State) {
	st.Data = checkpoint.DataPosition{Epoch: c.Epoch, Offset: c.Offset}
	st.RNG = map[string][]uint64{"prompt_order": {uint64(c.seed)}}
}

// Resume moves the cursor to a checkpoint's data position.
func (c *Cursor) Resume(st *checkpoint.State) { c.Seek(st.Data.Epoch, st.Data.Offset) }

// Next returns the indices of the next k prompts. dropLast: TRL's DataLoader(shuffle=True,
// drop_last=True) cycled forever (PPO): the k come from one epoch, a new epoch starts when
// fewer than k remain. Otherwise TRL's RepeatSampler over the distinct prompts (GRPO): an epoch
// running out continues into the next one.
func (c *Cursor) Next(k int, dropLast bool) []int {
	if c.order == nil {
		c.order = loop.Order(c.n, c.seed, c.Epoch)
	}
	out := make([]int, 0, k)
	for len(out) < k {
		if c.Offset >= len(c.order) || dropLast && len(out) == 0 && c.Offset+k > len(c.order) {
			c.Epoch, c.Offset = c.Epoch+1, 0
			c.order = loop.Order(c.n, c.seed, c.Epoch)
		}
		out = append(out, c.order[c.Offset])
		c.Offset++
	}
	return out
}

// Chunks calls f on [lo,hi) for consecutive chunks of size rows out of n (the last one may be
// shorter): the micro-batches of a forward pass or a generation call.
func Chunks(n, size int, f func(lo, hi int) error) error {
	for lo := 0; lo < n; lo += size {
		if err := f(lo, min(lo+size, n)); err != nil {
			return err
		}
	}
	return nil
}

// Generate samples the completions of prompts, perCall rows per generator call (0: all in one),
// the call of rows [lo,…) seeded opts.Seed + lo.
func Generate(g *generate.Generator, prompts []*encode.Prompt, opts generate.Options, perCall int) ([]generate.Generation, error) {
	if perCall <= 0 {
		perCall = max(1, len(prompts))
	}
	seed := opts.Seed
	var out []generate.Generation
	err := Chunks(len(prompts), perCall, func(lo, hi int) error {
		ids := make([][]int32, 0, hi-lo)
		for _, p := range prompts[lo:hi] {
			ids = append(ids, p.IDs)
		}
		opts.Seed = seed + uint64(lo)
		gens, err := g.Generate(ids, opts)
		out = append(out, gens...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	return out, nil
}
