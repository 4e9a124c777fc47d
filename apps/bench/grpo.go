package bench

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/rollout"
	"github.com/posttrain/posttrain/trainers/grpo"
)

// GRPOResult is the grpo workload's output.
type GRPOResult struct {
	Info
	Prompts     int `json:"prompts"`
	Generations int `json:"generations"`
	PromptLen   int `json:"prompt_len"`
	NewTokens   int `json:"new_tokens"`
	MicroBatch  int `json:"micro_batch"`
	Updates     int `json:"updates"` // optimizer updates, one per micro-batch
	// WarmupS: a short generation and one update on the timed shapes (compilation included).
	WarmupS float64 `json:"warmup_s"`
	// TimedCompiles are the graphs compiled during the timed step: 0 unless it recompiles.
	TimedCompiles int `json:"timed_compiles"`
	// StepS = GenerateS + RewardS + TrainS, the timed step.
	StepS          float64   `json:"step_s"`
	GenerateS      float64   `json:"generate_s"`
	RewardS        float64   `json:"reward_s"` // rewards and group advantages
	TrainS         float64   `json:"train_s"`
	GeneratedToks  int       `json:"generated_tokens"`
	GenTokensPerS  float64   `json:"generate_tokens_per_s"`
	TrainTokens    int       `json:"train_tokens"` // prompt + completion tokens through the updates
	TrainTokPerS   float64   `json:"train_tokens_per_s"`
	TrainTFLOPs    float64   `json:"train_achieved_tflops"`
	PeakTFLOPs     *float64  `json:"peak_tflops,omitempty"`
	TrainMFU       *float64  `json:"train_mfu,omitempty"`
	MeanReward     float64   `json:"mean_reward"`
	Losses         []float64 `json:"losses"`     // each update's loss, before it
	GradNorms      []float64 `json:"grad_norms"` // before clipping
	SequencesPerS  float64   `json:"sequences_per_s"`
	CompletionsLen int       `json:"completion_len"`
}

// GRPOParams are the grpo workload's settings.
type GRPOParams struct {
	Prompts, Generations int // prompts per step, completions per prompt (the group size)
	PromptLen, NewTokens int // tokens per prompt, per completion (EOS ignored)
	MicroBatch           int // completions per optimizer update
	Temperature, LR      float64
	PeakTFLOPs           float64 // > 0 adds the update's MFU
	Seed                 uint64
	// Reward scores one completion's token ids; nil means EvenTokenFraction.
	Reward func(ids []int32) float64
}

// EvenTokenFraction is the grpo workload's synthetic reward (hf_reference.py's too): the fraction
// of even token ids in the completion.
func EvenTokenFraction(ids []int32) float64 {
	even := 0
	for _, id := range ids {
		if id%2 == 0 {
			even++
		}
	}
	return float64(even) / float64(max(1, len(ids)))
}

// The loss of the timed updates is hf_reference.py's: TRL's loss_type "grpo" (the mean over each
// completion's tokens, then over the micro-batch) of the clipped surrogate with ε = 0.2 on both
// sides and β = 0, one micro-batch per update (no accumulation).
var grpoBenchParams = grpo.Params{EpsLow: 0.2, EpsHigh: 0.2}

const grpoBenchLossType = "grpo"

// grpoRun is one GRPO workload in progress.
type grpoRun struct {
	env      *Env
	p        GRPOParams
	res      *GRPOResult
	n        int       // completions per step
	prompts  [][]int32 // one per completion: each prompt repeated Generations times
	opt      *loop.Optimizer
	stepNorm func(rows, tokens int) float64
}

// GRPO times one GRPO step on Prompts random prompts through the trainer's own parts: the qwen2
// generator samples Generations completions of each (EOS ignored, so every completion has
// NewTokens tokens), p.Reward scores them, rl.TRLAdvantages standardises the rewards within each
// group (TRL's scale_rewards "group"), and every micro-batch of MicroBatch completions is one
// update through loop.Optimizer (gradient, global-norm clipping at 1, AdamW on float32 masters)
// of grpo's micro-batch loss graph (grpo.MicroBatchLoss: the completions' log-probs at the
// sampling temperature and the clipped surrogate, on-policy). A short last micro-batch is
// skipped so that one shape is compiled. env must be loaded for training.
func GRPO(env *Env, p GRPOParams) (*GRPOResult, error) {
	if env.Model == nil {
		return nil, fmt.Errorf("grpo: the model is not loaded for training")
	}
	if p.Reward == nil {
		p.Reward = EvenTokenFraction
	}
	n := p.Prompts * p.Generations
	r := &grpoRun{env: env, p: p, n: n, res: &GRPOResult{Info: env.Info, Prompts: p.Prompts, Generations: p.Generations,
		PromptLen: p.PromptLen, NewTokens: p.NewTokens, MicroBatch: min(p.MicroBatch, n), CompletionsLen: p.NewTokens}}
	rng := rand.New(rand.NewPCG(p.Seed, 0x6790))
	for _, pr := range randomIDs(rng, env.Config, p.Prompts, p.PromptLen) {
		for range p.Generations {
			r.prompts = append(r.prompts, pr)
		}
	}
	var lossFn loop.LossFunc
	lossFn, r.stepNorm = grpo.MicroBatchLoss(env.Config, p.NewTokens, p.Temperature, grpoBenchParams, grpoBenchLossType, 1)
	var err error
	if r.opt, err = loop.NewOptimizer(env.Backend, env.Model, benchAdamW, lossFn); err != nil {
		return nil, err
	}
	defer r.opt.Close()
	gen := generate.NewGenerator(env.Backend, env.Model.Ctx, decoder.Arch{Config: env.Config})
	defer gen.Finalize()
	if err := r.warmup(gen); err != nil {
		return nil, err
	}
	if err := r.step(gen); err != nil {
		return nil, err
	}
	return r.res, nil
}

func (r *grpoRun) sampling(maxNew int) generate.Options {
	return generate.Options{SampleOptions: generate.SampleOptions{Temperature: r.p.Temperature}, MaxNewTokens: maxNew,
		IgnoreEOS: true, Seed: r.p.Seed}
}

// warmup compiles the timed shapes: the sampling graphs on a short generation of the same cache
// bucket, and one update with zero advantages (a zero gradient: AdamW leaves the weights as they
// are).
func (r *grpoRun) warmup(gen *generate.Generator) error {
	t0 := time.Now()
	wg, err := gen.Generate(r.prompts, r.sampling(WarmupNewTokens(r.env.Backend, r.p.PromptLen, r.p.NewTokens)))
	if err != nil {
		return fmt.Errorf("warm-up generation: %w", err)
	}
	for i := range wg { // pad the short warm-up completions to the timed length
		for len(wg[i].IDs) < r.p.NewTokens {
			wg[i].IDs = append(wg[i].IDs, wg[i].IDs[len(wg[i].IDs)-1])
			wg[i].LogProbs = append(wg[i].LogProbs, 0)
		}
	}
	if _, err := r.update(wg, make([]float64, r.n), r.res.MicroBatch); err != nil {
		return fmt.Errorf("warm-up update: %w", err)
	}
	r.res.WarmupS = time.Since(t0).Seconds()
	r.env.logf("grpo warm-up (compilation included): %.1fs", r.res.WarmupS)
	return nil
}

// step is the timed step: generation, rewards and advantages, the updates.
func (r *grpoRun) step(gen *generate.Generator) error {
	res, p := r.res, r.p
	c0 := backend.Compiled()
	defer func() { res.TimedCompiles = backend.Compiled().Graphs - c0.Graphs }()
	tStep := time.Now()
	gens, err := gen.Generate(r.prompts, r.sampling(p.NewTokens))
	if err != nil {
		return fmt.Errorf("generation: %w", err)
	}
	res.GenerateS = time.Since(tStep).Seconds()
	t0 := time.Now()
	rewards := make([]float64, r.n)
	for i, g := range gens {
		if len(g.IDs) != p.NewTokens {
			return fmt.Errorf("completion %d has %d tokens, want %d", i, len(g.IDs), p.NewTokens)
		}
		rewards[i] = p.Reward(g.IDs)
		res.GeneratedToks += len(g.IDs)
		res.MeanReward += rewards[i] / float64(r.n)
	}
	adv, _, err := rl.TRLAdvantages(rewards, p.Generations, rl.ScaleGroup)
	if err != nil {
		return err
	}
	res.RewardS = time.Since(t0).Seconds()
	t0 = time.Now()
	updates, err := r.update(gens, adv, r.n)
	if err != nil {
		return fmt.Errorf("update: %w", err)
	}
	res.TrainS = time.Since(t0).Seconds()
	res.StepS = time.Since(tStep).Seconds()
	for _, u := range updates {
		res.Losses, res.GradNorms = append(res.Losses, u.loss), append(res.GradNorms, u.gradNorm)
		res.TrainTokens += u.rows * (p.PromptLen + p.NewTokens)
	}
	res.Updates = len(updates)
	res.GenTokensPerS = float64(res.GeneratedToks) / res.GenerateS
	res.SequencesPerS = float64(r.n) / res.StepS
	if res.TrainS > 0 {
		res.TrainTokPerS = float64(res.TrainTokens) / res.TrainS
	}
	res.TrainTFLOPs = res.TrainTokPerS * r.env.Info.FLOPsPerToken / 1e12
	if p.PeakTFLOPs > 0 {
		peak, mfu := p.PeakTFLOPs, res.TrainTFLOPs/p.PeakTFLOPs
		res.PeakTFLOPs, res.TrainMFU = &peak, &mfu
	}
	r.env.logf("grpo %d×%d×%d: step %.2fs (generate %.2fs, update %.2fs in %d micro-batches)",
		p.Prompts, p.Generations, p.NewTokens, res.StepS, res.GenerateS, res.TrainS, res.Updates)
	return nil
}

// update is one optimizer update's outcome.
type update struct {
	rows           int
	loss, gradNorm float64
}

// update runs one optimizer update per full micro-batch of the first limit completions: the
// micro-batch's gradient of the GRPO loss (loop.Optimizer.Micro), then AdamW (Apply).
func (r *grpoRun) update(gens []generate.Generation, adv []float64, limit int) ([]update, error) {
	// Prompts have PromptLen tokens (no padding) and completions NewTokens, so every completion
	// starts at position PromptLen: the trainer's layout with nothing padded.
	mb, clen := r.res.MicroBatch, r.p.NewTokens
	var out []update
	for lo := 0; lo+mb <= min(r.n, limit); lo += mb {
		var ids, attn [][]int32
		var mask, sampled [][]float32
		advs := make([]float32, mb)
		for i := lo; i < lo+mb; i++ {
			row := append(slices.Clone(r.prompts[i]), gens[i].IDs...)
			ids, attn = append(ids, row), append(attn, slices.Repeat([]int32{1}, len(row)))
			mask = append(mask, slices.Repeat([]float32{1}, clen))
			lps := make([]float32, clen)
			for t, lp := range gens[i].LogProbs {
				lps[t] = float32(lp)
			}
			sampled = append(sampled, lps)
			advs[i-lo] = float32(adv[i])
		}
		zeros := make([][]float32, mb) // π_old (on-policy: the graph's own) and π_ref (β = 0): unused
		for i := range zeros {
			zeros[i] = make([]float32, clen)
		}
		inputs := named.Of[any](grpo.MicroBatch[any]{Sequences: rollout.Sequences[any]{IDs: ids, Pos: decoder.PositionIDs(attn), Attn: attn},
			Mask: mask, Advantages: advs, OldLogProbs: zeros, RefLogProbs: zeros, SampledLogProbs: sampled})
		loss, _, err := r.opt.Micro(inputs, r.stepNorm(mb, mb*clen))
		if err != nil {
			return nil, err
		}
		gradNorm, err := r.opt.Apply(r.p.LR)
		if err != nil {
			return nil, err
		}
		out = append(out, update{rows: mb, loss: loss, gradNorm: gradNorm})
	}
	return out, nil
}
