package ppo

import (
	"fmt"
	"slices"

	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/engine/step"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Scored is one rollout batch with everything TRL's train() computes under torch.no_grad()
// before its PPO epochs (ppo_trainer.py, "Response Processing" and steps 4-6). Per-token tables
// are [B][Width] (Width: TRL's responses.shape[1], the batch's generated width); the graphs see
// them padded to response_length columns.
type Scored struct {
	rollout.Rollout           // the sampled rows: prompts, generated ids, the sampler's log-probs
	Queries         [][]int32 // [B][P] left-padded with pad_token_id
	Responses       [][]int32 // [B][R] generated ids, pad_token_id after the row's last
	Post            [][]int32 // truncate_response at stop_token_id (pad after it), or Responses
	Texts           []string  // the postprocessed responses decoded without special tokens
	Width           int       // generated columns (≤ R)

	LogProbs, RefLogProbs [][]float64 // INVALID_LOGPROB after each row's end
	Values                [][]float64 // 0 past sequence_length + 1
	Scores                []float64   // the reward model's, minus missing_eos_penalty where it applies
	SeqLen                []int       // TRL's sequence_lengths: the last response index before the first pad (−1: none)
	ContainEOS            []bool
	KL, NonScore          [][]float64
	Rewards               [][]float64 // after the score and the optional whitening
	Advantages, Returns   [][]float64 // whitened advantages (0 on padding) and GAE returns
}

// Len is the number of rows of the padded layout (Queries; the embedded Rollout counts its
// completions, which a hand-built layout may not carry).
func (r *Scored) Len() int { return len(r.Queries) }

// firstTrue is TRL's first_true_indices on one row: the first t with f(row[t]), len(row) if none.
func firstTrue(row []int32, f func(int32) bool) int {
	for t, x := range row {
		if f(x) {
			return t
		}
	}
	return len(row)
}

// sequences lays out queries[i]+resp[i] (resp: Responses or Post) as TRL's forward() feeds them:
// attention = ids ≠ pad, the pads' ids 0, positions the exclusive cumsum (rollout.Layout ByID).
func (t *Trainer) sequences(queries, resp [][]int32) (rollout.Sequences[any], error) {
	return rollout.Layout{PromptLen: t.promptLen, CompletionLen: t.cfg.ResponseLength, Pad: int32(t.pad), ByID: true}.Sequences(queries, resp)
}

// generateBatch samples the responses of prompts, local_rollout_forward_batch_size rows a device per
// call, as TRL's batch_generation with GenerationConfig(max_new_tokens=response_length,
// temperature=temperature+1e-7, top_k=0, top_p=1, do_sample=True) and the stop token as EOS.
func (t *Trainer) generateBatch(prompts []*Prompt, temperature float64, seed uint64) ([]generate.Generation, error) {
	opts := generate.Options{
		SampleOptions: generate.SampleOptions{Temperature: temperature + 1e-7, TopP: 1},
		MaxNewTokens:  t.cfg.ResponseLength,
		Seed:          seed,
		Tokenizer:     t.s.Decoder,
		StepsPerCall:  t.cfg.DecodeStepsPerCall,
	}
	if t.stopID >= 0 {
		opts.StopIDs = []int{t.stopID}
	} else {
		opts.IgnoreEOS = true // TRL's stop_token None: eos_token_id None, response_length tokens
	}
	gens, err := rollout.Generate(t.gen, prompts, opts, t.cfg.ForwardRows())
	if err != nil {
		return nil, fmt.Errorf("ppo: %w", err)
	}
	return gens, nil
}

// rolloutSeed is the sampler's seed of update round (rows add their offset).
func (t *Trainer) rolloutSeed(round int) uint64 {
	return uint64(t.cfg.Seed)*1_000_003 + uint64(round)*65_537
}

// newRollout generates the responses of prompts at temperature (+1e-7) from seed and lays them
// out.
func (t *Trainer) newRollout(prompts []*Prompt, temperature float64, seed uint64) (*Scored, error) {
	gens, err := t.generateBatch(prompts, temperature, seed)
	if err != nil {
		return nil, err
	}
	pad, R := int32(t.pad), t.cfg.ResponseLength
	r := &Scored{Rollout: rollout.New(prompts, gens)}
	for i, p := range prompts {
		q := make([]int32, t.promptLen)
		for j := range q {
			q[j] = pad
		}
		copy(q[t.promptLen-len(p.IDs):], p.IDs)
		resp := make([]int32, R)
		for j := range resp {
			resp[j] = pad
		}
		copy(resp, gens[i].IDs)
		r.Queries, r.Responses = append(r.Queries, q), append(r.Responses, resp)
		r.Width = max(r.Width, len(gens[i].IDs))
	}
	for _, resp := range r.Responses {
		post := slices.Clone(resp)
		if t.stopID >= 0 { // truncate_response: pad after the first stop token
			cut := firstTrue(resp, func(x int32) bool { return int(x) == t.stopID })
			for j := cut + 1; j < len(post); j++ {
				post[j] = pad
			}
		}
		r.Post = append(r.Post, post)
		ids := make([]int, 0, len(post))
		for _, x := range post[:firstTrue(post, func(x int32) bool { return x == pad })] {
			ids = append(ids, int(x))
		}
		r.Texts = append(r.Texts, t.s.Decoder.Decode(ids, true))
	}
	return r, nil
}

// scoreRollout runs the forward passes of a rollout (the policy's and the reference's log-probs,
// the value model's values, the reward model's scores), local_rollout_forward_batch_size rows a device at
// a time, then the host-side processing (process).
func (t *Trainer) scoreRollout(r *Scored) error {
	c := t.cfg
	w := r.Width
	r.LogProbs, r.RefLogProbs, r.Values = nil, nil, nil
	err := rollout.Chunks(r.Len(), t.cfg.ForwardRows(), func(lo, hi int) error {
		seq, err := t.sequences(r.Queries[lo:hi], r.Responses[lo:hi])
		if err != nil {
			return err
		}
		for _, e := range []struct {
			eval *step.ContextEval
			name string
			dst  *[][]float64
		}{{t.oldEval, "logps", &r.LogProbs}, {t.refEval, "logps", &r.RefLogProbs}, {t.valueEval, "values", &r.Values}} {
			outs, err := e.eval.Run(named.Of[any](seq))
			if err != nil {
				return err
			}
			flat := step.Float64s(outs[e.name])
			for i := range hi - lo {
				*e.dst = append(*e.dst, slices.Clone(flat[i*c.ResponseLength:i*c.ResponseLength+w]))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if r.Scores, err = t.rewardScores(r); err != nil {
		return err
	}
	return t.process(r)
}

// rewardScores are the reward model's scores of the postprocessed query+responses, as TRL's
// get_reward reads them: at the token before the response's first pad (the last query token
// when the response starts with one), local_rollout_forward_batch_size rows a device at a time.
func (t *Trainer) rewardScores(r *Scored) ([]float64, error) {
	var out []float64
	err := rollout.Chunks(r.Len(), t.cfg.ForwardRows(), func(lo, hi int) error {
		post, err := t.sequences(r.Queries[lo:hi], r.Post[lo:hi])
		if err != nil {
			return err
		}
		last := make([]int32, hi-lo)
		for i := range last {
			last[i] = int32(t.promptLen + firstTrue(r.Post[lo+i][:r.Width], func(x int32) bool { return int(x) == t.pad }) - 1)
		}
		scores, err := t.s.Reward.ScoreLayout(trainable.ScoreInputs[any]{IDs: post.IDs, Pos: post.Pos, Mask: post.Attn, Last: last})
		out = append(out, scores...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// process is TRL's host-side part of the rollout (ppo_trainer.py "Response Processing 3" to
// "6. compute advantages and returns"), in float64.
func (t *Trainer) process(r *Scored) error {
	c, w, pad := t.cfg, r.Width, int32(t.pad)
	n := r.Len()
	r.SeqLen, r.ContainEOS = make([]int, n), make([]bool, n)
	r.KL, r.NonScore, r.Rewards = make([][]float64, n), make([][]float64, n), make([][]float64, n)
	notPad, notPadP1 := make([][]bool, n), make([][]bool, n)
	for i := range n {
		post := r.Post[i][:w]
		r.SeqLen[i] = firstTrue(post, func(x int32) bool { return x == pad }) - 1
		r.ContainEOS[i] = slices.Contains(post, int32(t.eos))
		if c.MissingEOSPenalty != 0 && !r.ContainEOS[i] {
			r.Scores[i] -= c.MissingEOSPenalty
		}
		notPad[i], notPadP1[i] = make([]bool, w), make([]bool, w)
		r.KL[i], r.NonScore[i] = make([]float64, w), make([]float64, w)
		for j := range w {
			notPad[i][j], notPadP1[i][j] = j <= r.SeqLen[i], j <= r.SeqLen[i]+1
			if !notPad[i][j] {
				r.LogProbs[i][j], r.RefLogProbs[i][j] = InvalidLogProb, InvalidLogProb
			}
			if !notPadP1[i][j] {
				r.Values[i][j] = 0
			}
			r.KL[i][j] = rl.TokenKL(r.LogProbs[i][j], r.RefLogProbs[i][j], c.KLEstimator)
			r.NonScore[i][j] = -c.KLCoef * r.KL[i][j]
		}
		r.Rewards[i] = slices.Clone(r.NonScore[i])
		end := r.SeqLen[i] // actual_end: sequence_length + 1 when it is inside the response
		if end+1 < w {
			end++
		}
		r.Rewards[i][end] += r.Scores[i]
	}
	if c.WhitenRewards {
		wr, err := whitenZeroed(r.Rewards, notPadP1, false)
		if err != nil {
			return fmt.Errorf("ppo: whiten_rewards: %w", err)
		}
		r.Rewards = wr
	}
	adv := make([][]float64, n)
	r.Returns = make([][]float64, n)
	for i := range n {
		_, adv[i], r.Returns[i] = rl.GAE(r.Rewards[i], r.Values[i], 0, true, c.Gamma, c.Lam)
	}
	wa, err := whitenZeroed(adv, notPad, true)
	if err != nil {
		return fmt.Errorf("ppo: advantages: %w", err)
	}
	r.Advantages = wa
	return nil
}

// whitenZeroed is rl.MaskedWhiten of x over mask with the positions outside mask set to 0: TRL's
// masked_whiten followed by masked_fill(·, padding_mask, 0), for the rewards and the advantages.
func whitenZeroed(x [][]float64, mask [][]bool, shiftMean bool) ([][]float64, error) {
	w, err := rl.MaskedWhiten(x, mask, shiftMean)
	if err != nil {
		return nil, err
	}
	for i := range w {
		for j := range w[i] {
			if !mask[i][j] {
				w[i][j] = 0
			}
		}
	}
	return w, nil
}

// microBatch is the loss graph's feed of rows idx of the rollout, the queries padded to the
// micro-batch's longest, the per-token tables to response_length columns.
func (t *Trainer) microBatch(r *Scored, idx []int) (named.Feed, error) {
	R := t.cfg.ResponseLength
	table := func(src [][]float64, fill float64) [][]float32 {
		out := make([][]float32, len(idx))
		for k, i := range idx {
			out[k] = make([]float32, R)
			for j := range R {
				out[k][j] = float32(fill)
				if j < r.Width {
					out[k][j] = float32(src[i][j])
				}
			}
		}
		return out
	}
	mask := func(limit func(i int) int) [][]float32 {
		out := make([][]float32, len(idx))
		for k, i := range idx {
			out[k] = make([]float32, R)
			for j := range min(limit(i), r.Width) {
				out[k][j] = 1
			}
		}
		return out
	}
	// The micro-batch's own query width: its longest query (its queries' leading pads dropped,
	// which the layout's attention ignores anyway: TRL's ids ≠ pad), rounded up to 8, not the
	// dataset's longest; positions count real tokens only, so the log-probs and values are the
	// same up to XLA's shape-dependent rounding.
	p := 0
	for _, i := range idx {
		p = max(p, t.promptLen-firstTrue(r.Queries[i], func(x int32) bool { return int(x) != t.pad }))
	}
	p = min(t.promptLen, max(8, (p+7)/8*8))
	var queries, responses [][]int32
	for _, i := range idx {
		queries, responses = append(queries, r.Queries[i][t.promptLen-p:]), append(responses, r.Responses[i])
	}
	seq, err := rollout.Layout{PromptLen: p, CompletionLen: R, Pad: int32(t.pad), ByID: true}.Sequences(queries, responses)
	if err != nil {
		return named.Feed{}, err
	}
	return named.Of[any](MicroBatch[any]{
		Sequences:   seq,
		OldLogProbs: table(r.LogProbs, InvalidLogProb), Advantages: table(r.Advantages, 0),
		Values: table(r.Values, 0), Returns: table(r.Returns, 0),
		PGMask: mask(func(i int) int { return r.SeqLen[i] + 1 }),
		VFMask: mask(func(i int) int { return r.SeqLen[i] + 2 }),
		Cols:   mask(func(int) int { return r.Width }),
	}), nil
}
