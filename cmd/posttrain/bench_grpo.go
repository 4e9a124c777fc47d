package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/step"
)

// ---- bench grpo ----

func benchGRPOCommand() *cli.Command {
	return &cli.Command{
		Name: "grpo",
		Usage: "time one GRPO step: sample prompts × generations completions, reward, group advantages, " +
			"clipped-surrogate AdamW updates on micro-batches",
		Flags: append(benchModelFlags("bfloat16"),
			&cli.IntFlag{Name: "prompts", Value: 64, Usage: "prompts per step"},
			&cli.IntFlag{Name: "generations", Value: 8, Usage: "completions per prompt (the group size)"},
			&cli.IntFlag{Name: "prompt-len", Value: 64, Usage: "tokens per prompt"},
			&cli.IntFlag{Name: "new-tokens", Value: 64, Usage: "tokens per completion (EOS ignored)"},
			&cli.IntFlag{Name: "micro-batch", Value: 64, Usage: "completions per optimizer update"},
			&cli.Float64Flag{Name: "temperature", Value: 1, Usage: "sampling temperature"},
			&cli.Float64Flag{Name: "lr", Value: 1e-6, Usage: "AdamW learning rate"},
			&cli.Float64Flag{Name: "peak-tflops", Usage: "the device's peak TFLOP/s for the dtype; > 0 adds the update's MFU"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			p := grpoBenchParams{Prompts: cmd.Int("prompts"), Generations: cmd.Int("generations"), PromptLen: cmd.Int("prompt-len"),
				NewTokens: cmd.Int("new-tokens"), MicroBatch: cmd.Int("micro-batch"), Temperature: cmd.Float64("temperature"),
				LR: cmd.Float64("lr"), Peak: cmd.Float64("peak-tflops"), Seed: cmd.Uint64("seed")}
			if p.Prompts < 1 || p.Generations < 2 || p.PromptLen < 1 || p.NewTokens < 2 || p.MicroBatch < 1 || p.Temperature <= 0 {
				return usageError{fmt.Errorf("%s: need --prompts ≥ 1, --generations ≥ 2, --prompt-len ≥ 1, --new-tokens ≥ 2, --micro-batch ≥ 1, --temperature > 0", cmd.FullName())}
			}
			env, err := loadBenchModel(ctx, cmd, "grpo")
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			defer env.backend.Finalize()
			res, err := benchGRPO(cmd, env, p)
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return writeBenchJSON(cmd.Root().Writer, res)
		},
	}
}

type grpoBenchParams struct {
	Prompts, Generations, PromptLen, NewTokens, MicroBatch int
	Temperature, LR, Peak                                  float64
	Seed                                                   uint64
}

type benchGRPOResult struct {
	benchInfo
	Prompts     int `json:"prompts"`
	Generations int `json:"generations"`
	PromptLen   int `json:"prompt_len"`
	NewTokens   int `json:"new_tokens"`
	MicroBatch  int `json:"micro_batch"`
	Updates     int `json:"updates"`
	// WarmupS: a short generation and one update on the timed shapes (compilation included).
	WarmupS float64 `json:"warmup_s"`
	// StepS = GenerateS + RewardS + TrainS, the timed step.
	StepS          float64   `json:"step_s"`
	GenerateS      float64   `json:"generate_s"`
	RewardS        float64   `json:"reward_s"`
	TrainS         float64   `json:"train_s"`
	GeneratedToks  int       `json:"generated_tokens"`
	GenTokensPerS  float64   `json:"generate_tokens_per_s"`
	TrainTokens    int       `json:"train_tokens"` // prompt + completion tokens through the updates
	TrainTokPerS   float64   `json:"train_tokens_per_s"`
	TrainTFLOPs    float64   `json:"train_achieved_tflops"`
	PeakTFLOPs     float64   `json:"peak_tflops,omitempty"`
	TrainMFU       float64   `json:"train_mfu,omitempty"`
	MeanReward     float64   `json:"mean_reward"`
	Losses         []float64 `json:"losses"`
	GradNorms      []float64 `json:"grad_norms"`
	SequencesPerS  float64   `json:"sequences_per_s"`
	CompletionsLen int       `json:"completion_len"`
}

// benchGRPOReward is a synthetic reward: the fraction of even token ids in the completion.
func benchGRPOReward(ids []int32) float64 {
	even := 0
	for _, id := range ids {
		if id%2 == 0 {
			even++
		}
	}
	return float64(even) / float64(max(1, len(ids)))
}

// benchGroupAdvantages standardises rewards within each group of g consecutive completions:
// (r − mean)/(std + 1e-4), std the sample standard deviation (TRL's scale_rewards="group").
func benchGroupAdvantages(rewards []float64, g int) []float32 {
	adv := make([]float32, len(rewards))
	for lo := 0; lo < len(rewards); lo += g {
		grp := rewards[lo:min(lo+g, len(rewards))]
		mean, sq := 0.0, 0.0
		for _, r := range grp {
			mean += r / float64(len(grp))
		}
		for _, r := range grp {
			sq += (r - mean) * (r - mean)
		}
		std := 0.0
		if len(grp) > 1 {
			std = math.Sqrt(sq / float64(len(grp)-1))
		}
		for i, r := range grp {
			adv[lo+i] = float32((r - mean) / (std + 1e-4))
		}
	}
	return adv
}

func benchGRPO(cmd *cli.Command, env *benchEnv, p grpoBenchParams) (*benchGRPOResult, error) {
	cfg := env.cfg
	plen, clen := p.PromptLen, p.NewTokens
	n := p.Prompts * p.Generations
	res := &benchGRPOResult{benchInfo: env.info, Prompts: p.Prompts, Generations: p.Generations, PromptLen: plen, NewTokens: clen,
		MicroBatch: min(p.MicroBatch, n), CompletionsLen: clen}
	rng := rand.New(rand.NewPCG(p.Seed, 0x6790))
	base := benchRandomIDs(rng, cfg, p.Prompts, plen)
	prompts := make([][]int32, 0, n)
	for _, pr := range base {
		for range p.Generations {
			prompts = append(prompts, pr)
		}
	}
	gen := generate.NewGenerator(env.backend, env.ctx, qwen2.Arch{Config: cfg})
	defer gen.Finalize()
	upd, err := step.New(env.backend, env.ctx, step.Config{Optimizer: step.AdamW, LearningRate: p.LR, MaxGradNorm: 1},
		func(ctx *mlctx.Context, in []*Node) (*Node, []*Node) {
			ids, pos, attn, mask, adv := in[0], in[1], in[2], in[3], in[4]
			s := ids.Shape().Dim(1)
			hidden := qwen2.Hidden(ctx, cfg, ids, pos, attn)                 // [B,P+C,D]
			h := Slice(hidden, AxisRange(), AxisRange(plen-1, s-1))          // [B,C,D]: predicts the completion
			targets := Slice(ids, AxisRange(), AxisRange(plen, s))           // [B,C]
			chunk := qwen2.ChunkLen(ids.Shape().Dim(0), clen, cfg.VocabSize) //
			lp := qwen2.HeadLogProbs(ctx, cfg, h, targets, chunk)            // [B,C]
			loss, _ := grpo.Loss(grpo.Inputs{LogProbs: lp, OldLogProbs: StopGradient(lp), Mask: mask, Advantages: adv},
				grpo.Params{EpsLow: 0.2, EpsHigh: 0.2}, grpo.TokenRatio, grpo.GRPOMean)
			return loss, nil
		})
	if err != nil {
		return nil, err
	}
	sample := generate.Options{SampleOptions: generate.SampleOptions{Temperature: p.Temperature}, IgnoreEOS: true, Seed: p.Seed}
	// update runs the optimizer over the rollout in micro-batches; only [lo,hi) when limited.
	update := func(gens []generate.Generation, adv []float32, limit int) error {
		for lo := 0; lo < min(n, limit); lo += res.MicroBatch {
			hi := min(n, lo+res.MicroBatch)
			if hi-lo < res.MicroBatch { // keep one compiled shape: a short last batch is skipped
				break
			}
			var ids, attn [][]int32
			var mask [][]float32
			for r := lo; r < hi; r++ {
				row := append(slices.Clone(prompts[r]), gens[r].IDs...)
				ids, attn = append(ids, row), append(attn, slices.Repeat([]int32{1}, len(row)))
				mask = append(mask, slices.Repeat([]float32{1}, clen))
			}
			r, err := upd.Run(tensors.FromValue(ids), tensors.FromValue(qwen2.PositionIDs(attn)), tensors.FromValue(attn),
				tensors.FromValue(mask), tensors.FromValue(adv[lo:hi]))
			if err != nil {
				return err
			}
			if limit == n {
				res.Losses, res.GradNorms = append(res.Losses, r.Loss), append(res.GradNorms, r.GradNorm)
				res.Updates++
				res.TrainTokens += (hi - lo) * (plen + clen)
			}
		}
		return nil
	}
	// Warm-up: the sampling graphs on a short generation of the same buckets, one update.
	t0 := time.Now()
	warm := sample
	warm.MaxNewTokens = benchWarmupNewTokens(plen, clen)
	wg, err := gen.Generate(prompts, warm)
	if err != nil {
		return nil, fmt.Errorf("warm-up generation: %w", err)
	}
	for i := range wg { // pad the short warm-up completions to the timed length
		for len(wg[i].IDs) < clen {
			wg[i].IDs = append(wg[i].IDs, wg[i].IDs[len(wg[i].IDs)-1])
		}
	}
	if err := update(wg, make([]float32, n), res.MicroBatch); err != nil {
		return nil, fmt.Errorf("warm-up update: %w", err)
	}
	res.WarmupS = time.Since(t0).Seconds()
	benchLog(cmd, "grpo warm-up (compilation included): %.1fs", res.WarmupS)

	// The timed step.
	sample.MaxNewTokens = clen
	tStep := time.Now()
	gens, err := gen.Generate(prompts, sample)
	if err != nil {
		return nil, fmt.Errorf("generation: %w", err)
	}
	res.GenerateS = time.Since(tStep).Seconds()
	t0 = time.Now()
	rewards := make([]float64, n)
	for i, g := range gens {
		if len(g.IDs) != clen {
			return nil, fmt.Errorf("completion %d has %d tokens, want %d", i, len(g.IDs), clen)
		}
		rewards[i] = benchGRPOReward(g.IDs)
		res.GeneratedToks += len(g.IDs)
		res.MeanReward += rewards[i] / float64(n)
	}
	adv := benchGroupAdvantages(rewards, p.Generations)
	res.RewardS = time.Since(t0).Seconds()
	t0 = time.Now()
	if err := update(gens, adv, n); err != nil {
		return nil, fmt.Errorf("update: %w", err)
	}
	res.TrainS = time.Since(t0).Seconds()
	res.StepS = time.Since(tStep).Seconds()
	res.GenTokensPerS = float64(res.GeneratedToks) / res.GenerateS
	res.SequencesPerS = float64(n) / res.StepS
	if res.TrainS > 0 {
		res.TrainTokPerS = float64(res.TrainTokens) / res.TrainS
	}
	res.TrainTFLOPs = res.TrainTokPerS * env.info.FLOPsPerToken / 1e12
	if p.Peak > 0 {
		res.PeakTFLOPs, res.TrainMFU = p.Peak, res.TrainTFLOPs/p.Peak
	}
	benchLog(cmd, "grpo %d×%d×%d: step %.2fs (generate %.2fs, update %.2fs in %d micro-batches)",
		p.Prompts, p.Generations, clen, res.StepS, res.GenerateS, res.TrainS, res.Updates)
	return res, nil
}
