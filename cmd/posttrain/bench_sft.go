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

	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/sft"
	"github.com/posttrain/posttrain/trainers/step"
)

// ---- bench sft ----

func benchSFTCommand() *cli.Command {
	return &cli.Command{
		Name:  "sft",
		Usage: "time SFT training steps (forward, backward, clip, AdamW) on rows × seq-len random tokens",
		Flags: append(benchModelFlags("bfloat16"),
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "rows per step"},
			&cli.IntFlag{Name: "seq-len", Value: 512, Usage: "tokens per row"},
			&cli.IntFlag{Name: "steps", Value: 3, Usage: "timed steps"},
			&cli.IntFlag{Name: "warmup", Value: 1, Usage: "untimed steps first (the first compiles)"},
			&cli.Float64Flag{Name: "lr", Value: 1e-5, Usage: "AdamW learning rate"},
			&cli.Float64Flag{Name: "peak-tflops", Usage: "the device's peak TFLOP/s for the dtype; > 0 adds MFU to the report"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			rows, seq, steps, warm := cmd.Int("batch"), cmd.Int("seq-len"), cmd.Int("steps"), cmd.Int("warmup")
			if rows < 1 || seq < 2 || steps < 1 || warm < 1 {
				return usageError{fmt.Errorf("%s: need --batch ≥ 1, --seq-len ≥ 2, --steps ≥ 1, --warmup ≥ 1", cmd.FullName())}
			}
			env, err := loadBenchModel(ctx, cmd, "sft")
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			defer env.backend.Finalize()
			res, err := benchSFT(cmd, env, rows, seq, steps, warm, cmd.Float64("lr"), cmd.Float64("peak-tflops"), cmd.Uint64("seed"))
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return writeBenchJSON(cmd.Root().Writer, res)
		},
	}
}

type benchTrainTiming struct {
	TokensPerStep int       `json:"tokens_per_step"`
	WarmupS       float64   `json:"warmup_s"` // the warm-up steps, compilation included
	StepS         []float64 `json:"step_s"`
	MeanStepS     float64   `json:"mean_step_s"`
	TokensPerS    float64   `json:"tokens_per_s"`
	TFLOPs        float64   `json:"achieved_tflops"` // tokens/s · 6N / 1e12
	PeakTFLOPs    float64   `json:"peak_tflops,omitempty"`
	MFU           float64   `json:"mfu,omitempty"`
}

type benchSFTResult struct {
	benchInfo
	Batch  int `json:"batch"`
	SeqLen int `json:"seq_len"`
	benchTrainTiming
	Losses []float64 `json:"losses"`
}

func (t *benchTrainTiming) finish(flopsPerToken, peak float64) {
	t.MeanStepS = 0
	for _, s := range t.StepS {
		t.MeanStepS += s / float64(len(t.StepS))
	}
	if t.MeanStepS > 0 {
		t.TokensPerS = float64(t.TokensPerStep) / t.MeanStepS
	}
	t.TFLOPs = t.TokensPerS * flopsPerToken / 1e12
	if peak > 0 {
		t.PeakTFLOPs, t.MFU = peak, t.TFLOPs/peak
	}
}

func benchSFT(cmd *cli.Command, env *benchEnv, rows, seq, steps, warm int, lr, peak float64, seed uint64) (*benchSFTResult, error) {
	cfg := env.cfg
	st, err := step.New(env.backend, env.ctx, step.Config{Optimizer: step.AdamW, LearningRate: lr, MaxGradNorm: 1},
		func(ctx *mlctx.Context, in []*Node) (*Node, []*Node) {
			return sft.NLL(qwen2.TokenLogProbs(ctx, cfg, in[0], in[1], in[2]), in[3]), nil
		})
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5f7))
	ids := benchRandomIDs(rng, cfg, rows, seq)
	mask := make([][]int32, rows)
	for r := range mask {
		mask[r] = slices.Repeat([]int32{1}, seq)
	}
	args := []any{tensors.FromValue(ids), tensors.FromValue(qwen2.PositionIDs(mask)), tensors.FromValue(mask),
		tensors.FromValue(qwen2.ScoredMask(mask, nil))}
	res := &benchSFTResult{benchInfo: env.info, Batch: rows, SeqLen: seq}
	res.TokensPerStep = rows * seq
	t0 := time.Now()
	for range warm {
		r, err := st.Run(args...)
		if err != nil {
			return nil, fmt.Errorf("warm-up step: %w", err)
		}
		res.Losses = append(res.Losses, r.Loss)
	}
	res.WarmupS = time.Since(t0).Seconds()
	benchLog(cmd, "sft warm-up (%d steps, compilation included): %.1fs", warm, res.WarmupS)
	for i := range steps {
		t0 = time.Now()
		r, err := st.Run(args...) // returns host scalars: the step has finished
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		res.StepS = append(res.StepS, time.Since(t0).Seconds())
		res.Losses = append(res.Losses, r.Loss)
		if math.IsNaN(r.Loss) {
			return nil, fmt.Errorf("step %d: loss is NaN", i+1)
		}
	}
	res.finish(env.info.FLOPsPerToken, peak)
	benchLog(cmd, "sft %d×%d: %.3fs/step, %.0f tokens/s, %.1f TFLOP/s", rows, seq, res.MeanStepS, res.TokensPerS, res.TFLOPs)
	return res, nil
}
