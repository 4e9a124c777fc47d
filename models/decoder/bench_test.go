package decoder

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
)

// eighthConfig is Qwen2.5-0.5B at one-eighth width: hidden 896, 14/2 heads, intermediate 4864,
// vocabulary 8192, 2 layers (37.2M parameters).
func eighthConfig() *Config {
	return &Config{ModelType: "qwen2", VocabSize: 8192, HiddenSize: 896, IntermediateSize: 4864, NumHiddenLayers: 2,
		NumAttentionHeads: 14, NumKeyValueHeads: 2, HeadDim: 64, RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, HiddenAct: "silu", InitializerRange: 0.02}
}

// benchBatch is batch 2 × 64 random tokens, all real, scored from position 1.
func benchBatch(cfg *Config) *Batch {
	rng := rand.New(rand.NewPCG(1, 2))
	b := &Batch{}
	for range 2 {
		ids, mask := make([]int32, 64), make([]int32, 64)
		for i := range ids {
			ids[i], mask[i] = int32(rng.IntN(cfg.VocabSize)), 1
		}
		b.IDs, b.Mask = append(b.IDs, ids), append(b.Mask, mask)
	}
	return b
}

func benchModel(b *testing.B) (*context.Context, *Config, *Batch) {
	cfg := eighthConfig()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	ctx := context.New()
	if err := InitWeights(ctx, cfg, 42, dtypes.Float32); err != nil {
		b.Fatal(err)
	}
	return ctx, cfg, benchBatch(cfg)
}

// reportTokens reports tokens/s and the process CPU seconds per op: the machine's 2 cores are
// shared, so wall time alone overstates the cost when other jobs run.
func reportTokens(b *testing.B, batch *Batch, start time.Time, cpuStart time.Duration, n int) {
	rows, s := batch.Dims()
	b.ReportMetric(float64(rows*s*n)/time.Since(start).Seconds(), "tokens/s")
	b.ReportMetric((cpuTime()-cpuStart).Seconds()/float64(max(n, 1)), "cpu-s/op")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkForward: TokenLogProbs on the eighth config, B2×S64. `make bench` times the same
// workload beside PyTorch (bench/ BenchmarkCPU, scripts/reference/cpu_bench.py).
func BenchmarkForward(b *testing.B) {
	ctx, cfg, batch := benchModel(b)
	exec, err := context.NewExec(backend.SharedForTests(), ctx, func(ctx *context.Context, ids, pos, mask *Node) *Node {
		return TokenLogProbs(ctx, cfg, ids, pos, mask)
	})
	if err != nil {
		b.Fatal(err)
	}
	defer exec.Finalize()
	args := batchTensors(batch)[:3]
	if _, err := exec.Exec(args...); err != nil { // compile
		b.Fatal(err)
	}
	start, cpuStart, n := time.Now(), cpuTime(), 0
	for b.Loop() {
		if _, err := exec.Exec(args...); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportTokens(b, batch, start, cpuStart, n)
}

// BenchmarkTrainStep: forward, backward, global-norm clip and AdamW on the eighth config,
// B2×S64. `make bench` times the trainers' AdamW step on the same shape beside PyTorch's.
func BenchmarkTrainStep(b *testing.B) {
	ctx, cfg, batch := benchModel(b)
	s := newTrainStep(b, backend.SharedForTests(), ctx, cfg, 1.0)
	in := batchFeed(batch)
	if _, err := s.Run(in); err != nil { // compile, create the optimizer state
		b.Fatal(err)
	}
	start, cpuStart, n := time.Now(), cpuTime(), 0
	for b.Loop() {
		if _, err := s.Run(in); err != nil {
			b.Fatal(err)
		}
		n++
	}
	reportTokens(b, batch, start, cpuStart, n)
}
