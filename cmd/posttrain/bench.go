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
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/models/hub"
	"github.com/posttrain/posttrain/models/qwen2"
)

func init() {
	addCommand(&cli.Command{
		Name:   "bench",
		Usage:  "measure decoding, SFT and GRPO steps on synthetic data (JSON on stdout; used by scripts/gpu-check.sh)",
		Hidden: true,
		Commands: []*cli.Command{
			benchBackendCommand(), benchInputsCommand(), benchDecodeCommand(), benchSFTCommand(), benchGRPOCommand(), benchSampleCommand(), benchParityCommand(), benchReportCommand(),
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
	want := generate.BucketLen(generate.BucketLen(plen) + newTok)
	for n := 2; n < newTok; n++ {
		if generate.BucketLen(generate.BucketLen(plen)+n) == want {
			return n
		}
	}
	return newTok
}

func benchDecode(cmd *cli.Command, env *benchEnv, batches []int, plen, newTok int, seed uint64) (*benchDecodeResult, error) {
	rng := rand.New(rand.NewPCG(seed, 0xdec0de))
	gen := generate.NewGenerator(env.backend, env.ctx, qwen2.Arch{Config: env.cfg})
	defer gen.Finalize()
	res := &benchDecodeResult{benchInfo: env.info}
	for _, bs := range batches {
		prompts := benchRandomIDs(rng, env.cfg, bs, plen)
		opts := generate.Options{MaxNewTokens: benchWarmupNewTokens(plen, newTok), IgnoreEOS: true, Seed: seed}
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
