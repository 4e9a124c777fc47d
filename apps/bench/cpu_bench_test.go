package bench

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// BenchmarkCPU is posttrain's side of `make bench` (scripts/bench-cpu.sh): the workloads that
// scripts/reference/cpu_bench.py times in PyTorch on the same shapes, random weights, on the
// backend of $GOMLX_BACKEND (default: the pure-Go one). Run it with -benchtime 1x: each
// sub-benchmark does its own warm-up (compilation included) and timed repetitions.
//
//	forward      decoder.TokenLogProbs of 2×64 tokens on the eighth-width config, float32: median of 5
//	adamw        one SFT optimizer step on the same shape (sft.Trainer's loss, loop.Optimizer:
//	             gradient, clip at 1, AdamW), float32: median of 3
//	grpo         one GRPO step on the eighth-width config: 2 prompts × 4 completions of 16 tokens
//	             from 16-token prompts, temperature 1 (the workload of `posttrain bench grpo`):
//	             median of 3 (compile figures of the first)
//	decode       batch-1 greedy decoding at Qwen2.5-0.5B's shape in float32: an 8-token prompt,
//	             32 new tokens; tokens/s of the decode steps
//	decode_bf16  the same with bfloat16 weights and activations
//
// Besides its figures, each reports compile-s (the wall time of every graph compilation of the
// sub-benchmark: the compile time apart from the run time), graphs (how many) and
// timed-compiles (those inside the timed runs: 0 unless a step recompiles).
func BenchmarkCPU(b *testing.B) {
	eighth := eighthConfig()
	full, err := decoder.Preset("qwen2.5-0.5b")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("forward", func(b *testing.B) {
		c0 := backend.Compiled()
		env := randomEnv(b, eighth, false, dtypes.Float32)
		exec, err := mlctx.NewExec(env.Backend, env.Ctx, func(ctx *mlctx.Context, ids, pos, mask *Node) *Node {
			return decoder.TokenLogProbs(ctx, env.Config, ids, pos, mask)
		})
		if err != nil {
			b.Fatal(err)
		}
		defer exec.Finalize()
		ids, mask := randomRows(eighth, 2, 64)
		args := []any{tensors.FromValue(ids), tensors.FromValue(decoder.PositionIDs(mask)), tensors.FromValue(mask)}
		run := func() error {
			out, err := exec.Exec(args...)
			if err == nil {
				_ = tensors.MustCopyFlatData[float32](out[0]) // the result reaches the host
			}
			return err
		}
		for b.Loop() {
			if err := run(); err != nil { // warm-up: compilation
				b.Fatal(err)
			}
			timed := backend.Compiled()
			b.ReportMetric(medianSeconds(b, 5, run), "s/op-median")
			reportCompiles(b, c0, backend.Compiled().Graphs-timed.Graphs)
		}
	})
	b.Run("adamw", func(b *testing.B) {
		c0 := backend.Compiled()
		env := randomEnv(b, eighth, true, dtypes.Float32)
		for b.Loop() {
			res, err := SFT(env, SFTParams{Batch: 2, SeqLen: 64, Steps: 3, Warmup: 1, LR: 1e-5, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(median(res.StepS), "s/op-median")
			reportCompiles(b, c0, res.TimedCompiles)
		}
	})
	b.Run("grpo", func(b *testing.B) {
		env := randomEnv(b, eighth, true, dtypes.Float32)
		for b.Loop() {
			// The workload times one step after its warm-up; three of them give a median, as the
			// other workloads have (the compile figures are the first's: each run compiles anew).
			var step, gen, upd []float64
			timed := 0
			for i := range 3 {
				c0 := backend.Compiled()
				res, err := GRPO(env, GRPOParams{Prompts: 2, Generations: 4, PromptLen: 16, NewTokens: 16, MicroBatch: 8,
					Temperature: 1, LR: 1e-6, Seed: 4})
				if err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					reportCompiles(b, c0, 0)
				}
				timed += res.TimedCompiles
				step, gen, upd = append(step, res.StepS), append(gen, res.GenerateS), append(upd, res.TrainS)
			}
			b.ReportMetric(median(step), "s/step")
			b.ReportMetric(median(gen), "generate-s")
			b.ReportMetric(median(upd), "update-s")
			b.ReportMetric(float64(timed), "timed-compiles")
		}
	})
	for _, d := range []struct {
		name  string
		dtype dtypes.DType
	}{{"decode", dtypes.Float32}, {"decode_bf16", dtypes.BFloat16}} {
		b.Run(d.name, func(b *testing.B) {
			c0 := backend.Compiled()
			env := randomEnv(b, full, false, d.dtype)
			for b.Loop() {
				res, err := Decode(env, DecodeParams{Batches: []int{1}, PromptLen: 8, NewTokens: 32, Seed: 3})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.Runs[0].DecodeTokensPerSecond, "tokens/s")
				b.ReportMetric(res.Runs[0].PrefillS, "prefill-s")
				reportCompiles(b, c0, res.Runs[0].TimedCompiles)
			}
		})
	}
}

// reportCompiles reports the graph compilations since c0: their wall time (compile-s), their
// number (graphs) and timed of them inside the timed runs (timed-compiles).
func reportCompiles(b *testing.B, c0 backend.CompileStats, timed int) {
	c := backend.Compiled()
	b.ReportMetric((c.Time - c0.Time).Seconds(), "compile-s")
	b.ReportMetric(float64(c.Graphs-c0.Graphs), "graphs")
	b.ReportMetric(float64(timed), "timed-compiles")
}

// eighthConfig is Qwen2.5-0.5B at one-eighth width: hidden 896, 14/2 heads, intermediate 4864,
// vocabulary 8192, 2 layers (37.2M parameters).
func eighthConfig() *decoder.Config {
	cfg, err := decoder.Preset("qwen2.5-0.5b")
	if err != nil {
		panic(err)
	}
	cfg.VocabSize, cfg.NumHiddenLayers = 8192, 2
	cfg.BOSTokenID, cfg.EOSTokenIDs = nil, []int{8191}
	return cfg
}

// randomEnv is cfg with random weights of dtype (decoder.InitWeights) on the backend of
// $GOMLX_BACKEND, held for training (float32 weights, no masters) when training is set.
func randomEnv(b *testing.B, cfg *decoder.Config, training bool, dtype dtypes.DType) *Env {
	b.Helper()
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	ctx := mlctx.New()
	if training && dtype != dtypes.Float32 {
		b.Fatalf("the training workloads hold float32 weights, not %s", dtype)
	}
	if err := decoder.InitWeights(ctx, cfg, 42, dtype); err != nil {
		b.Fatal(err)
	}
	name := backend.Resolve("")
	be, err := backend.New(name)
	if err != nil {
		b.Fatal(err)
	}
	n := cfg.NumParameters()
	env := &Env{DType: dtype, Ctx: ctx, Config: cfg, Backend: be, log: testLog{b},
		Info: Info{Backend: name, DType: strings.ToLower(dtype.String()), Params: n, Layers: cfg.NumHiddenLayers, Hidden: cfg.HiddenSize,
			Vocab: cfg.VocabSize, FLOPsPerToken: 6 * float64(n)}}
	if training {
		env.Model = &trainable.Model{Config: cfg, Ctx: ctx, DType: dtypes.Float32}
	}
	b.Cleanup(env.Close)
	return env
}

// randomRows are rows × n random ids, all real tokens.
func randomRows(cfg *decoder.Config, rows, n int) (ids, mask [][]int32) {
	ids = randomIDs(rand.New(rand.NewPCG(1, 2)), cfg, rows, n)
	for range rows {
		mask = append(mask, slices.Repeat([]int32{1}, n))
	}
	return ids, mask
}

// medianSeconds runs fn once untimed (compilation), then reps times, and returns the median time.
func medianSeconds(b *testing.B, reps int, fn func() error) float64 {
	b.Helper()
	var times []float64
	for i := range reps + 1 {
		t0 := time.Now()
		if err := fn(); err != nil {
			b.Fatal(err)
		}
		if i > 0 {
			times = append(times, time.Since(t0).Seconds())
		}
	}
	return median(times)
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// testLog sends the workloads' progress lines to the benchmark's log.
type testLog struct{ b *testing.B }

func (l testLog) Write(p []byte) (int, error) {
	l.b.Log(string(p))
	return len(p), nil
}
