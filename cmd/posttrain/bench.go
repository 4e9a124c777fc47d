package main

// `posttrain bench`: hidden measurement subcommands for scripts/gpu-check.sh. Each runs one
// workload on synthetic data with a checkpoint (e.g. from `posttrain init`) and prints one JSON
// object on stdout (progress goes to stderr):
//
//	bench inputs   a scoring batch in the qwen2-tiny input format (left- and right-padded rows)
//	bench decode   batched greedy decoding with the KV cache: tokens/s per batch size
//	bench sft      AdamW steps on rows × seq-len tokens: step time, tokens/s, MFU against 6·N
//	bench grpo     one GRPO step: sample prompts × generations completions, group advantages of
//	               a synthetic reward, clipped-surrogate updates on micro-batches
//	bench report   the gpu-check report from the stage records (bench_report.go)
//
// The first call of every compiled shape is a warm-up (compilation) and is reported apart.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/hub"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/sft"
	"github.com/posttrain/posttrain/trainers/step"
)

func init() {
	addCommand(&cli.Command{
		Name:   "bench",
		Usage:  "measure decoding, SFT and GRPO steps on synthetic data (JSON on stdout; used by scripts/gpu-check.sh)",
		Hidden: true,
		Commands: []*cli.Command{
			benchInputsCommand(), benchDecodeCommand(), benchSFTCommand(), benchGRPOCommand(), benchSampleCommand(), benchParityCommand(), benchReportCommand(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unknown subcommand %q; valid: %s", cmd.FullName(), cmd.Args().First(), commandNames(cmd.Commands))}
			}
			return cli.ShowSubcommandHelp(cmd)
		},
	})
}

// benchModelFlags are the flags every workload takes.
func benchModelFlags(defaultDType string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Required: true, Usage: "checkpoint directory or HuggingFace repo id"},
		&cli.StringFlag{Name: "dtype", Value: defaultDType, Usage: "dtype of weights and activations: float32 or bfloat16"},
		backendFlag(),
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the synthetic data and of sampling"},
	}
}

// benchEnv is a loaded model on a backend.
type benchEnv struct {
	dir     string       // the checkpoint directory
	dtype   dtypes.DType // weights and activations
	ctx     *mlctx.Context
	cfg     *qwen2.Config
	backend backends.Backend
	info    benchInfo
}

// benchInfo is the common header of every workload's JSON.
type benchInfo struct {
	Workload    string  `json:"workload"`
	Backend     string  `json:"backend"`
	BackendDesc string  `json:"backend_description"`
	DType       string  `json:"dtype"`
	Params      int     `json:"params"`
	Layers      int     `json:"layers"`
	Hidden      int     `json:"hidden"`
	Vocab       int     `json:"vocab"`
	LoadS       float64 `json:"load_s"`
	// FLOPsPerToken is 6·N, the training cost per token (forward 2N, backward 4N), N = Params.
	FLOPsPerToken float64 `json:"flops_per_token"`
}

func loadBenchModel(ctx context.Context, cmd *cli.Command, workload string) (*benchEnv, error) {
	if cmd.Args().Len() > 0 {
		return nil, usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
	}
	dtype, err := qwen2.ParseDType(cmd.String("dtype"))
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: --dtype: %w", cmd.FullName(), err)}
	}
	t0 := time.Now()
	dir, err := hub.Resolve(ctx, cmd.String("model"), hub.Options{})
	if err != nil {
		return nil, err
	}
	mctx, cfg, err := qwen2.Load(dir, dtype)
	if err != nil {
		return nil, err
	}
	cfgName := backend.Resolve(cmd.String("backend"))
	b, err := backend.New(cfgName)
	if err != nil {
		return nil, err
	}
	n := cfg.NumParameters()
	env := &benchEnv{dir: dir, dtype: dtype, ctx: mctx, cfg: cfg, backend: b, info: benchInfo{
		Workload: workload, Backend: cfgName, BackendDesc: b.Description(), DType: strings.ToLower(dtype.String()),
		Params: n, Layers: cfg.NumHiddenLayers, Hidden: cfg.HiddenSize, Vocab: cfg.VocabSize,
		LoadS: time.Since(t0).Seconds(), FLOPsPerToken: 6 * float64(n),
	}}
	benchLog(cmd, "%s: %s, %d parameters, %s on %s (loaded in %.1fs)", workload, cmd.String("model"), n, dtype, cfgName, env.info.LoadS)
	return env, nil
}

func benchLog(cmd *cli.Command, format string, args ...any) {
	fmt.Fprintf(cmd.Root().ErrWriter, "bench: "+format+"\n", args...)
}

func writeBenchJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// parseInts reads a comma-separated list of positive integers.
func benchParseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

// randomIDs draws rows × n token ids uniformly from the vocabulary, avoiding the stop ids so that a
// prompt never contains an end of sequence.
func benchRandomIDs(rng *rand.Rand, cfg *qwen2.Config, rows, n int) [][]int32 {
	out := make([][]int32, rows)
	for r := range out {
		out[r] = make([]int32, n)
		for t := range out[r] {
			id := rng.IntN(cfg.VocabSize)
			for slices.Contains(cfg.EOSTokenIDs, id) {
				id = rng.IntN(cfg.VocabSize)
			}
			out[r][t] = int32(id)
		}
	}
	return out
}

// ---- bench inputs ----

func benchInputsCommand() *cli.Command {
	return &cli.Command{
		Name:  "inputs",
		Usage: "print a scoring batch (qwen2-tiny input format): rows of random tokens, left- and right-padded",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "vocab", Required: true, Usage: "vocabulary size (ids are drawn from [0, vocab))"},
			&cli.IntFlag{Name: "rows", Value: 4, Usage: "rows (≥ 1)"},
			&cli.IntFlag{Name: "len", Value: 128, Usage: "sequence length (≥ 8)"},
			&cli.IntFlag{Name: "completion-start", Value: -1, Usage: "first scored position (default len/4)"},
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the token ids"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			vocab, rows, n := cmd.Int("vocab"), cmd.Int("rows"), cmd.Int("len")
			if vocab < 2 || rows < 1 || n < 8 {
				return usageError{fmt.Errorf("%s: need --vocab ≥ 2, --rows ≥ 1, --len ≥ 8", cmd.FullName())}
			}
			start := cmd.Int("completion-start")
			if start < 0 {
				start = n / 4
			}
			return json.NewEncoder(cmd.Root().Writer).Encode(benchInputs(vocab, rows, n, start, cmd.Uint64("seed")))
		},
	}
}

type benchBatchJSON struct {
	InputIDs        [][]int32 `json:"input_ids"`
	AttentionMask   [][]int32 `json:"attention_mask"`
	CompletionStart int       `json:"completion_start"`
}

// benchInputs lays out rows: row 0 full, odd rows left-padded by len/8·row, other even rows
// right-padded by len/8; pads hold id 0.
func benchInputs(vocab, rows, n, start int, seed uint64) benchBatchJSON {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := benchBatchJSON{CompletionStart: start}
	for r := range rows {
		ids, mask := make([]int32, n), make([]int32, n)
		lo, hi := 0, n
		switch {
		case r == 0:
		case r%2 == 1:
			lo = min(n/2, n/8*r)
		default:
			hi = n - n/8
		}
		for t := lo; t < hi; t++ {
			ids[t], mask[t] = int32(rng.IntN(vocab)), 1
		}
		out.InputIDs, out.AttentionMask = append(out.InputIDs, ids), append(out.AttentionMask, mask)
	}
	return out
}

// ---- bench decode ----

func benchDecodeCommand() *cli.Command {
	return &cli.Command{
		Name:  "decode",
		Usage: "time batched greedy decoding with the KV cache (tokens/s per batch size)",
		Flags: append(benchModelFlags("bfloat16"),
			&cli.StringFlag{Name: "batch", Value: "1,64,256", Usage: "comma-separated batch sizes"},
			&cli.IntFlag{Name: "prompt-len", Value: 64, Usage: "prompt tokens per row"},
			&cli.IntFlag{Name: "new-tokens", Value: 64, Usage: "tokens generated per row (EOS ignored)"},
		),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			batches, err := benchParseInts(cmd.String("batch"))
			if err != nil {
				return usageError{fmt.Errorf("%s: --batch: %w", cmd.FullName(), err)}
			}
			plen, newTok := cmd.Int("prompt-len"), cmd.Int("new-tokens")
			if plen < 1 || newTok < 2 {
				return usageError{fmt.Errorf("%s: need --prompt-len ≥ 1 and --new-tokens ≥ 2", cmd.FullName())}
			}
			env, err := loadBenchModel(ctx, cmd, "decode")
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			defer env.backend.Finalize()
			res, err := benchDecode(cmd, env, batches, plen, newTok, cmd.Uint64("seed"))
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return writeBenchJSON(cmd.Root().Writer, res)
		},
	}
}

type benchDecodeRun struct {
	Batch     int     `json:"batch"`
	Rows      int     `json:"rows"` // compiled batch bucket
	PromptLen int     `json:"prompt_len"`
	NewTokens int     `json:"new_tokens"`
	CacheLen  int     `json:"cache_len"`
	WarmupS   float64 `json:"warmup_s"` // first call of these shapes: compilation included
	PrefillS  float64 `json:"prefill_s"`
	DecodeS   float64 `json:"decode_s"`
	TotalS    float64 `json:"total_s"`
	Tokens    int     `json:"tokens"`
	// TokensPerS counts every generated token over prefill + decode; DecodeTokensPerS the tokens
	// of the decode steps (all but the first of each row) over the decode time.
	TokensPerS       float64 `json:"tokens_per_s"`
	DecodeTokensPerS float64 `json:"decode_tokens_per_s"`
}

type benchDecodeResult struct {
	benchInfo
	Runs []benchDecodeRun `json:"runs"`
}

// benchWarmupNewTokens is the fewest new tokens (≥ 2: one prefill and one decode step) whose cache
// bucket is that of newTok.
func benchWarmupNewTokens(plen, newTok int) int {
	want := qwen2.BucketLen(qwen2.BucketLen(plen) + newTok)
	for n := 2; n < newTok; n++ {
		if qwen2.BucketLen(qwen2.BucketLen(plen)+n) == want {
			return n
		}
	}
	return newTok
}

func benchDecode(cmd *cli.Command, env *benchEnv, batches []int, plen, newTok int, seed uint64) (*benchDecodeResult, error) {
	rng := rand.New(rand.NewPCG(seed, 0xdec0de))
	gen := qwen2.NewGenerator(env.backend, env.ctx, env.cfg)
	defer gen.Finalize()
	res := &benchDecodeResult{benchInfo: env.info}
	for _, bs := range batches {
		prompts := benchRandomIDs(rng, env.cfg, bs, plen)
		opts := qwen2.GenerateOptions{MaxNewTokens: benchWarmupNewTokens(plen, newTok), IgnoreEOS: true, Seed: seed}
		t0 := time.Now()
		if _, err := gen.Generate(prompts, opts); err != nil {
			return nil, fmt.Errorf("batch %d warm-up: %w", bs, err)
		}
		warm := time.Since(t0)
		opts.MaxNewTokens = newTok
		t0 = time.Now()
		gens, err := gen.Generate(prompts, opts)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", bs, err)
		}
		total := time.Since(t0)
		st := gen.Stats()
		run := benchDecodeRun{Batch: bs, Rows: st.Rows, PromptLen: plen, NewTokens: newTok, CacheLen: st.CacheLen,
			WarmupS: warm.Seconds(), PrefillS: st.Prefill.Seconds(), DecodeS: st.Decode.Seconds(), TotalS: total.Seconds()}
		for _, g := range gens {
			run.Tokens += len(g.IDs)
		}
		run.TokensPerS = float64(run.Tokens) / total.Seconds()
		if st.Decode > 0 {
			run.DecodeTokensPerS = float64(run.Tokens-len(gens)) / st.Decode.Seconds()
		}
		benchLog(cmd, "decode batch %d: %d tokens in %.2fs (%.0f tokens/s; warm-up %.1fs)", bs, run.Tokens, run.TotalS, run.TokensPerS, run.WarmupS)
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

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
	gen := qwen2.NewGenerator(env.backend, env.ctx, cfg)
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
	sample := qwen2.GenerateOptions{SampleOptions: qwen2.SampleOptions{Temperature: p.Temperature}, IgnoreEOS: true, Seed: p.Seed}
	// update runs the optimizer over the rollout in micro-batches; only [lo,hi) when limited.
	update := func(gens []qwen2.Generation, adv []float32, limit int) error {
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
