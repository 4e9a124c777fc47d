package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/sft"
)

// TrainTiming is the timing part of a training workload's JSON.
type TrainTiming struct {
	TokensPerStep int     `json:"tokens_per_step"`
	WarmupS       float64 `json:"warmup_s"` // the warm-up steps, compilation included
	// TimedCompiles are the graphs compiled during the timed steps: 0 unless a step recompiles.
	TimedCompiles int       `json:"timed_compiles"`
	StepS         []float64 `json:"step_s"`
	MeanStepS     float64   `json:"mean_step_s"`
	TokensPerS    float64   `json:"tokens_per_s"`
	TFLOPs        float64   `json:"achieved_tflops"` // tokens/s · 6N / 1e12
	PeakTFLOPs    *float64  `json:"peak_tflops,omitempty"`
	MFU           *float64  `json:"mfu,omitempty"`
}

// SFTResult is the sft workload's output. Losses are the mean NLL of each step's batch before its
// update, the warm-up steps first.
type SFTResult struct {
	Info
	Batch  int `json:"batch"`
	SeqLen int `json:"seq_len"`
	TrainTiming
	Memory
	Losses []float64 `json:"losses"`
}

// SFTParams are the sft workload's settings.
type SFTParams struct {
	Batch, SeqLen  int // rows of random tokens per step, tokens per row
	Steps, Warmup  int // timed steps, untimed steps first (the first compiles)
	LR, PeakTFLOPs float64
	Seed           uint64
}

// benchAdamW are the hyper-parameters of the timed optimizer steps, those of hf_reference.py's
// torch.optim.AdamW: PyTorch's betas and ε, no weight decay, the gradient norm clipped at 1.
var benchAdamW = loop.OptimizerConfig{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-8, MaxGradNorm: 1}

func (t *TrainTiming) finish(flopsPerToken, peak float64) {
	t.MeanStepS = 0
	for _, s := range t.StepS {
		t.MeanStepS += s / float64(len(t.StepS))
	}
	if t.MeanStepS > 0 {
		t.TokensPerS = float64(t.TokensPerStep) / t.MeanStepS
	}
	t.TFLOPs = t.TokensPerS * flopsPerToken / 1e12
	if peak > 0 {
		mfu := t.TFLOPs / peak
		t.PeakTFLOPs, t.MFU = &peak, &mfu
	}
}

// SFT times optimizer steps of SFT on Batch × SeqLen random tokens, every token after a row's
// first scored, through the trainer's own path: sft.Trainer's Batch (padded to the loop's length
// bucket) and Loss (NLL over the step's tokens, plus its accuracy and entropy metrics), and
// loop.Optimizer (gradient accumulation, global-norm clipping, AdamW on float32 masters). env must
// be loaded for training.
func SFT(env *Env, p SFTParams) (*SFTResult, error) {
	if env.Model == nil {
		return nil, fmt.Errorf("sft: the model is not loaded for training")
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x5f7))
	rows := randomIDs(rng, env.Config, p.Batch, p.SeqLen)
	tr, err := sft.FromTokens(env.Model, rows, "nll")
	if err != nil {
		return nil, err
	}
	opt, err := loop.NewOptimizer(env.Backend, env.Model, benchAdamW, tr.Loss)
	if err != nil {
		return nil, err
	}
	defer opt.Close()
	all := make([]int, tr.NumExamples())
	norm := 0.0
	for i := range all {
		all[i] = i
		norm += tr.Units(i)
	}
	// step is one optimizer step over every row, as the loop's with one micro-batch.
	step := func() (float64, error) {
		inputs, err := tr.Batch(all)
		if err != nil {
			return 0, err
		}
		loss, _, err := opt.Micro(inputs, norm)
		if err != nil {
			return 0, err
		}
		_, err = opt.Apply(p.LR) // returns host scalars: the step has finished
		return loss, err
	}
	res := &SFTResult{Info: env.Info, Batch: p.Batch, SeqLen: p.SeqLen}
	res.TokensPerStep = p.Batch * p.SeqLen
	t0 := time.Now()
	for range p.Warmup {
		loss, err := step()
		if err != nil {
			return nil, fmt.Errorf("warm-up step: %w", err)
		}
		res.Losses = append(res.Losses, loss)
	}
	res.WarmupS = time.Since(t0).Seconds()
	env.logf("sft warm-up (%d steps, compilation included): %.1fs", p.Warmup, res.WarmupS)
	c0 := backend.Compiled()
	for i := range p.Steps {
		t0 = time.Now()
		loss, err := step()
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		res.StepS = append(res.StepS, time.Since(t0).Seconds())
		res.Losses = append(res.Losses, loss)
		if math.IsNaN(loss) {
			return nil, fmt.Errorf("step %d: loss is NaN", i+1)
		}
	}
	res.TimedCompiles = backend.Compiled().Graphs - c0.Graphs
	res.finish(env.Info.FLOPsPerToken, p.PeakTFLOPs)
	if res.Memory, err = measureMemory(env.Model); err != nil {
		return nil, err
	}
	env.logf("sft %d×%d: %.3fs/step, %.0f tokens/s, %.1f TFLOP/s", p.Batch, p.SeqLen, res.MeanStepS, res.TokensPerS, res.TFLOPs)
	return res, nil
}
