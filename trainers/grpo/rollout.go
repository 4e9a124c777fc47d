package grpo

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/extreward"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// Scored is one generation batch: len(Completions) = prompts × num_generations, the G samples of
// a prompt consecutive (TRL's RepeatSampler order), with everything the update needs: the sampled
// rows (rollout.Rollout) and GRPO's rewards, advantages and loss mask.
type Scored struct {
	rollout.Rollout
	Texts []string // completions decoded without special tokens
	// Mask[i][t] = 1 for the completion tokens the loss counts: every generated token up to and
	// including the first stop token (TRL L1301-1305), none of a truncated completion when
	// mask_truncated_completions is set (DAPO's overlong filtering, TRL L1391-1395).
	Mask [][]float32

	Rewards     []float64            // weighted nansum over reward functions
	FuncRewards map[string][]float64 // per reward function (NaN = not applicable)
	Advantages  []float64
	GroupStd    []float64 // std the advantage of each completion was scaled by (TRL's std_rewards)

	OldLogp, RefLogp [][]float32 // [N][C], when computed

	// Tools is set when the completions ran tool calls (Setup.Tools): ToolCalls calls were made,
	// ToolFailures of them failed, and Mask is 0 on the tool turns' tokens. Texts are then each
	// completion's last assistant turn, Conversations its turns as messages (TRL's completions:
	// what a Python reward function receives, and completions.jsonl's "conversation").
	Tools                   bool
	ToolCalls, ToolFailures int
	Conversations           [][]chat.Message
	ModelTokens             []int // each completion's own tokens (its length less its tool turns')
}

// toolMetrics are TRL 1.x's tool metrics of a multi-turn rollout (none without tools): the calls
// per completion, and the failed share of the calls (0 without calls).
func (r *Scored) toolMetrics() map[string]float64 {
	if !r.Tools {
		return nil
	}
	m := map[string]float64{"tools/call_frequency": float64(r.ToolCalls) / float64(r.Len()), "tools/failure_frequency": 0}
	if r.ToolCalls > 0 {
		m["tools/failure_frequency"] = float64(r.ToolFailures) / float64(r.ToolCalls)
	}
	return m
}

// conversation is completion i's turns as JSON (completions.jsonl), nil without tools.
func (r *Scored) conversation(i int) json.RawMessage {
	if r.Conversations == nil {
		return nil
	}
	b, err := json.Marshal(r.Conversations[i])
	if err != nil {
		return nil
	}
	return b
}

// newScored builds the rollout of generations for prompts (each repeated numGenerations times);
// turns, when the completions ran tool calls, masks their tool turns out of the loss.
func newScored(prompts []*Prompt, gens []generate.Generation, maskTruncated bool, turns *toolTurns) *Scored {
	r := &Scored{Rollout: rollout.New(prompts, gens)}
	if turns != nil {
		r.Tools, r.ToolCalls, r.ToolFailures, r.Conversations = true, turns.calls, turns.failures, turns.conversations
		for _, m := range turns.mask {
			n := 0
			for _, v := range m {
				n += int(v)
			}
			r.ModelTokens = append(r.ModelTokens, n)
		}
	}
	for i, g := range gens {
		r.Texts = append(r.Texts, g.Text)
		m := make([]float32, len(g.IDs))
		if !(maskTruncated && g.Truncated) {
			for t := range m {
				m[t] = 1
				if turns != nil {
					m[t] = turns.mask[i][t]
				}
			}
		}
		r.Mask = append(r.Mask, m)
	}
	return r
}

// Batch is the padded tensors of rows [lo,hi) of a rollout, in the layout of rollout.CompletionLogProbs.
type Batch struct {
	rollout.Sequences[any] // [][]int32
	Mask                   [][]float32
	Sampled                [][]float32
	PromptLen              int // P
	CompletionLen          int // C
}

// widths are the prompt and completion widths of rows [lo,hi): their longest prompt and longest
// completion, each rounded up to generate.BucketLen's buckets (so that a run compiles a few
// shapes, not one per length) and at most maxPrompt and maxCompletion. TRL pads each batch to its
// own longest row too; padding every batch to the dataset's longest prompt and
// max_completion_length instead pays for the widest rows on every batch (and attention's S²).
func (r *Scored) widths(lo, hi, maxPrompt, maxCompletion int) (p, c int) {
	for i := lo; i < hi; i++ {
		p, c = max(p, len(r.Prompts[i].IDs)), max(c, len(r.Completions[i]))
	}
	// An environment's observation may make a prompt longer than the dataset's longest: then the
	// batch is as wide as its longest prompt.
	return min(max(maxPrompt, p), generate.BucketLen(p)), min(maxCompletion, generate.BucketLen(max(c, 1)))
}

// batch lays out rows [lo,hi) with prompts left-padded to promptLen and completions right-padded
// to completionLen (pad id 0, attention 0; position ids HF's cumsum(attn)−1).
func (r *Scored) batch(lo, hi, promptLen, completionLen int) (*Batch, error) {
	b := &Batch{PromptLen: promptLen, CompletionLen: completionLen}
	var prompts [][]int32
	for i := lo; i < hi; i++ {
		prompts = append(prompts, r.Prompts[i].IDs)
		mask, sampled := make([]float32, completionLen), make([]float32, completionLen)
		copy(mask, r.Mask[i])
		for t, lp := range r.SampledLogp[i] {
			sampled[t] = float32(lp)
		}
		b.Mask, b.Sampled = append(b.Mask, mask), append(b.Sampled, sampled)
	}
	var err error
	b.Sequences, err = rollout.Layout{PromptLen: promptLen, CompletionLen: completionLen}.Sequences(prompts, r.Completions[lo:hi])
	if err != nil {
		return nil, fmt.Errorf("grpo batch: %w", err)
	}
	return b, nil
}

// rows returns rows [lo,hi) of a table of float32 rows as a fresh [hi-lo][c] table, each row cut
// or zero-padded to c (past a row's completion nothing is read), zeros when nil.
func rows(t [][]float32, lo, hi, c int) [][]float32 {
	out := make([][]float32, hi-lo)
	for i := range out {
		out[i] = make([]float32, c)
		if t != nil {
			copy(out[i], t[lo+i])
		}
	}
	return out
}

// completionTokens counts the generated tokens of the whole generation batch, stop tokens
// included: TRL v0.24's num_items_in_batch (grpo_trainer.py _generate: the sum of the
// completion lengths), the dapo normaliser. It counts the truncated completions that
// mask_truncated_completions takes out of the loss too, and it is the whole batch's even when
// steps_per_generation > gradient_accumulation_steps splits it over several optimizer steps;
// TRL 1.x counts the loss tokens and rescales to one step (docs/training.md, "TRL 1.x").
// With tools it counts the model's own tokens, as TRL 1.x's completion lengths do.
func (r *Scored) completionTokens() int {
	n := 0
	for i := range r.Completions {
		n += r.completionLen(i)
	}
	return n
}

// completionLen is completion i's length: its tokens, less its tool turns' (TRL 1.x counts only
// the model's tokens, tool_mask 1, in completion lengths and num_tokens).
func (r *Scored) completionLen(i int) int {
	if r.ModelTokens != nil {
		return r.ModelTokens[i]
	}
	return len(r.Completions[i])
}

// lengthStats are TRL's completion-length metrics (grpo_trainer.py L1329-1346).
func (r *Scored) lengthStats() map[string]float64 {
	var all, term []float64
	for i := range r.Completions {
		all = append(all, float64(r.completionLen(i)))
		if !r.Truncated[i] {
			term = append(term, float64(r.completionLen(i)))
		}
	}
	m := map[string]float64{}
	put := func(prefix string, xs []float64) {
		if len(xs) == 0 {
			m[prefix+"mean_length"], m[prefix+"min_length"], m[prefix+"max_length"] = 0, 0, 0
			return
		}
		m[prefix+"mean_length"], m[prefix+"min_length"], m[prefix+"max_length"] = mean(xs), slices.Min(xs), slices.Max(xs)
	}
	put("completions/", all)
	m["completions/mean_terminated_length"], m["completions/min_terminated_length"], m["completions/max_terminated_length"] = 0, 0, 0
	if len(term) > 0 {
		m["completions/mean_terminated_length"] = mean(term)
		m["completions/min_terminated_length"] = slices.Min(term)
		m["completions/max_terminated_length"] = slices.Max(term)
	}
	clipped := 0.0
	for _, t := range r.Truncated {
		if t {
			clipped++
		}
	}
	m["completions/clipped_ratio"] = clipped / float64(len(r.Truncated))
	return m
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// nextPrompts returns the prompts of the next generation batch, each repeated num_generations
// times (TRL's RepeatSampler): distinct prompts in a per-epoch shuffled order seeded by the run's
// seed, continuing into the next epoch when this one runs out.
func (t *Trainer) nextPrompts() []*Prompt {
	var out []*Prompt
	for _, i := range t.cursor.Next(t.genBatch/t.cfg.NumGenerations, false) {
		for range t.cfg.NumGenerations {
			out = append(out, t.s.Prompts[i])
		}
	}
	return out
}

// sampleOptions are the rollout's sampler settings (GRPOConfig temperature, top_k, top_p, min_p,
// repetition_penalty; HF applies the penalty to the raw logits, then the temperature, top-k,
// top-p, min-p). The trainer still scores the completions under the whole tempered, unpenalised
// distribution, as TRL does, so shaping the sampler makes π_old differ from the sampling
// distribution (by the kept mass for truncation, TRL #6789); sampling_logp_difference compares the
// sampler's log-probs of that same distribution and is not affected.
func (t *Trainer) sampleOptions() generate.SampleOptions {
	return generate.SampleOptions{Temperature: t.cfg.Temperature, TopK: t.cfg.TopK, TopP: t.cfg.TopP, MinP: t.cfg.MinP,
		RepetitionPenalty: t.cfg.RepetitionPenalty}
}

// generateOptions are the generation call's: the sampler, max_completion_length new tokens, the
// stop tokens, seed.
func (t *Trainer) generateOptions(seed uint64) generate.Options {
	return generate.Options{SampleOptions: t.sampleOptions(), MaxNewTokens: t.cfg.MaxCompletionLength, Seed: seed,
		StopIDs: t.s.StopIDs, Tokenizer: t.s.Decoder, StepsPerCall: t.cfg.DecodeStepsPerCall}
}

// rewardState is the trainer_state external reward functions receive: HF's TrainerState as of the
// generation (global_step: the optimizer steps done).
func (t *Trainer) rewardState() extreward.State {
	c := t.cfg
	return extreward.State{GlobalStep: t.globalStep, Epoch: t.epochAt(t.globalStep), MaxSteps: t.totalSteps,
		NumTrainEpochs: c.NumTrainEpochs, LoggingSteps: c.LoggingSteps, EvalSteps: c.EvalSteps, SaveSteps: c.SaveSteps,
		TrainBatchSize: c.PerDeviceTrainBatchSize, IsLocalProcessZero: true, IsWorldProcessZero: true}
}

// generate samples one completion of each prompt, through its tool calls when the run has tools
// (Tools.run; turns is nil without), and returns the prompts the rollouts generated from: with an
// environment, each rollout's instance is reset first, and its observation extends its prompt.
func (t *Trainer) generate(prompts []*Prompt, seed uint64) (_ []*Prompt, gens []generate.Generation, turns *toolTurns, err error) {
	if e := t.s.Environment; e != nil {
		if prompts, err = e.reset(prompts); err != nil {
			return nil, nil, nil, &loop.Fault{Err: err}
		}
	}
	opts := t.generateOptions(seed)
	gen := func(p []*Prompt, o generate.Options) ([]generate.Generation, error) {
		return rollout.Generate(t.gen, p, o, 0)
	}
	first := gen
	if t.s.firstTurns != nil {
		first = t.s.firstTurns
	}
	if gens, err = first(prompts, opts); err != nil || t.s.Tools == nil {
		return prompts, gens, nil, err
	}
	if turns, err = t.s.Tools.run(gen, prompts, gens, opts, t.decode, t.s.Environment); err != nil {
		return nil, nil, nil, err
	}
	for i := range gens { // the text rewards judge: the model's last turn (the answer after the tools')
		gens[i].Text = turns.last[i]
	}
	return prompts, gens, turns, nil
}

// decode is a completion's text without special tokens, as the reward functions see it.
func (t *Trainer) decode(ids []int32) string { return t.s.Decoder.Decode(toInts(ids), true) }

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// timings of one generation round: scoring includes the rewards (timing_s/rewards, the reward
// functions' calls: the overhead of a Python worker or a reward server shows there; where they
// run beside the log-prob passes, scoring is the longer of the two, not their sum).
type timings struct{ generation, scoring, rewards time.Duration }

// overlapRewards reports whether the rewards may run beside the log-prob passes: there are such
// passes, and no reward is a reward model (which runs on the backend).
func (t *Trainer) overlapRewards() bool {
	if t.oldEval == nil && t.refEval == nil {
		return false
	}
	for _, rw := range t.s.Rewards {
		if rw.Scorer != nil {
			return false
		}
	}
	return true
}

// rollout generates, scores and prepares one generation batch.
func (t *Trainer) rollout() (*Scored, timings, error) {
	var tm timings
	prompts := t.nextPrompts()
	t0 := time.Now()
	prompts, gens, turns, err := t.generate(prompts, uint64(t.cfg.Seed)*1_000_003+uint64(t.round))
	if err != nil {
		if f, ok := err.(*loop.Fault); ok {
			return nil, tm, &loop.Fault{Err: fmt.Errorf("grpo: step %d: %w", t.globalStep+1, f.Err)}
		}
		return nil, tm, fmt.Errorf("grpo: %w", err)
	}
	tm.generation = time.Since(t0)
	t.round++
	t0 = time.Now()
	r := newScored(prompts, gens, t.cfg.MaskTruncatedCompletions, turns)
	// The rewards run beside the old and reference log-probs (a Python worker's or a reward
	// server's latency hidden behind the forward passes), unless a reward model needs the backend
	// too: neither reads what the other writes, and the reward functions are called in their
	// order, so the rollout is the same either way.
	var rewardErr error
	rewardsDone := make(chan struct{})
	go func() {
		defer close(rewardsDone)
		t1 := time.Now()
		rewardErr = scoreRewards(r, t.s.Rewards, t.rewardState())
		tm.rewards = time.Since(t1)
	}()
	fault := func() error { return &loop.Fault{Err: fmt.Errorf("grpo: step %d: %w", t.globalStep+1, rewardErr)} }
	if !t.overlapRewards() {
		if <-rewardsDone; rewardErr != nil {
			return nil, tm, fault()
		}
	}
	var oldErr, refErr error
	if t.oldEval != nil {
		r.OldLogp, oldErr = t.score(t.oldEval, r)
	}
	if t.refEval != nil && oldErr == nil {
		r.RefLogp, refErr = t.score(t.refEval, r)
	}
	<-rewardsDone
	switch {
	case rewardErr != nil:
		return nil, tm, fault()
	case oldErr != nil:
		return nil, tm, fmt.Errorf("grpo: old log-probs: %w", oldErr)
	case refErr != nil:
		return nil, tm, fmt.Errorf("grpo: reference log-probs: %w", refErr)
	}
	scale := rl.ScaleRewards(t.cfg.ScaleRewards)
	if err := advantages(r, t.cfg.NumGenerations, scale, t.cfg.Advantage); err != nil {
		return nil, tm, fmt.Errorf("grpo: %w", err)
	}
	tm.scoring = time.Since(t0)
	for i := range r.Completions {
		t.tokensSeen += int64(len(r.Prompts[i].IDs) + r.completionLen(i))
	}
	return r, tm, nil
}

// score runs a forward-only log-prob graph over the rollout, one micro-batch of rows at a time
// (per_device_train_batch_size rows on each device).
func (t *Trainer) score(e *step.ContextEval, r *Scored) ([][]float32, error) {
	return t.scoreLayout(e, r, t.promptLen, t.cfg.MicroBatch())
}

// scoreLayout is score with mb rows per forward pass (the last one may be shorter), each laid out
// to its own widths (prompts at most promptLen): one row of log-probs per completion, as wide as
// its forward pass.
func (t *Trainer) scoreLayout(e *step.ContextEval, r *Scored, promptLen, mb int) ([][]float32, error) {
	var out [][]float32
	err := rollout.Chunks(r.Len(), mb, func(lo, hi int) error {
		p, c := r.widths(lo, hi, promptLen, t.cfg.MaxCompletionLength)
		b, err := r.batch(lo, hi, p, c)
		if err != nil {
			return err
		}
		outs, err := e.Run(named.Of[any](scoreInputs[any]{Sequences: b.Sequences, Mask: b.Mask}))
		if err != nil {
			return err
		}
		flat := step.Float64s(outs["logps"])
		for i := range hi - lo {
			row := make([]float32, c)
			for j := range row {
				row[j] = float32(flat[i*c+j])
			}
			out = append(out, row)
		}
		return nil
	})
	return out, err
}
