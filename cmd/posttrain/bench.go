package main

// `posttrain bench`: hidden measurement subcommands for scripts/gpu-check.sh, thin wiring of
// the bench package (flags → its workloads, one JSON object on stdout, progress on stderr):
//
//	bench backend  the backend's PJRT plugin and API versions, a client, its devices, one graph
//	bench inputs   a scoring batch in the qwen2-tiny input format (left- and right-padded rows)
//	bench decode   batched greedy decoding with the KV cache: tokens/s per batch size
//	bench sft      SFT steps on rows × seq-len tokens: step time, tokens/s, MFU against 6·N
//	bench grpo     one GRPO step: sample prompts × generations completions, group advantages of
//	               a synthetic reward, clipped-surrogate updates on micro-batches
//	bench sample   every sampler variant on --backend and on the pure-Go backend, tokens compared
//	bench parity   the training loop's AdamW steps on one batch, to compare with PyTorch
//	bench report   the gpu-check report from the stage records

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/apps/bench"
	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
)

func init() {
	addCommand(&cli.Command{
		Name:   "bench",
		Usage:  "measure decoding, SFT and GRPO steps on synthetic data (JSON on stdout; used by scripts/gpu-check.sh)",
		Hidden: true,
		Commands: []*cli.Command{
			benchBackendCommand(), benchInputsCommand(), benchDecodeCommand(), benchSFTCommand(), benchGRPOCommand(),
			benchMemoryCommand(), benchSampleCommand(), benchParityCommand(), benchReportCommand(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unknown subcommand %q; valid: %s", cmd.FullName(), cmd.Args().First(), commandNames(cmd.Commands))}
			}
			return cli.ShowSubcommandHelp(cmd)
		},
	})
}

// benchModelFlags are the flags every model workload takes.
func benchModelFlags(defaultDType string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Usage: "checkpoint directory or HuggingFace repo id (or --preset)"},
		&cli.StringFlag{Name: "preset", Usage: "instead of --model, a model shape with random weights (nothing downloaded or kept): " + strings.Join(decoder.PresetNames, ", ")},
		&cli.StringFlag{Name: "dtype", Value: defaultDType, Usage: "dtype of weights and activations: float32 or bfloat16"},
		backendFlag(),
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the synthetic data and of sampling"},
		&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on one line (default: indented)"},
	}
}

// benchWorkload is the Action of a model workload: parse reads its flags into its parameters (a
// usageError for bad ones), then the model is loaded (for training, with float32 masters, when
// training is set), run runs the workload and its result is printed as JSON; a result with a
// Verdict (the sampler's comparison) fails the command after it is printed when the check fails.
func benchWorkload[P, R any](workload string, training bool, parse func(cmd *cli.Command) (P, error),
	run func(cmd *cli.Command, env *bench.Env, p P) (*R, error)) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		if cmd.Args().Len() > 0 {
			return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
		}
		p, err := parse(cmd)
		if err != nil {
			if ue := (usageError{}); errors.As(err, &ue) {
				return usageError{fmt.Errorf("%s: %w", cmd.FullName(), ue.error)}
			}
			return fmt.Errorf("%s: %w", cmd.FullName(), err)
		}
		dtype, err := decoder.ParseDType(cmd.String("dtype"))
		if err != nil {
			return usageError{fmt.Errorf("%s: --dtype: %w", cmd.FullName(), err)}
		}
		model, preset := cmd.String("model"), cmd.String("preset")
		switch {
		case (model == "") == (preset == ""):
			return usageError{fmt.Errorf("%s: give one of --model and --preset", cmd.FullName())}
		case preset != "":
			if _, err := decoder.Preset(preset); err != nil {
				return usageError{fmt.Errorf("%s: --preset: %w", cmd.FullName(), err)}
			}
		}
		lo := bench.LoadOptions{Model: model, Preset: preset, DType: dtype, Backend: cmd.String("backend"),
			Workload: workload, Training: training, LoRA: benchLoRAConfig(cmd), Log: cmd.Root().ErrWriter}
		if d, ok := any(&p).(interface{ DumpDir() *string }); ok {
			// XLA's optimised modules, for the decode step's cache copies: a temporary directory.
			dump, err := os.MkdirTemp("", "posttrain-hlo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dump)
			lo.DumpHLO, *d.DumpDir() = dump, dump
		}
		env, err := bench.Load(ctx, lo)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd.FullName(), err)
		}
		defer env.Close()
		res, err := run(cmd, env, p)
		if err != nil {
			return fmt.Errorf("%s: %w", cmd.FullName(), err)
		}
		write := bench.WriteJSON
		if cmd.Bool("json") {
			write = bench.WriteJSONLine
		}
		if err := write(cmd.Root().Writer, res); err != nil {
			return err
		}
		if v, ok := any(res).(interface{ Verdict() error }); ok {
			if err := v.Verdict(); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
		}
		return nil
	}
}

// benchUsage is a usage error of a workload's flags (benchWorkload names the command).
func benchUsage(msg string) error { return usageError{errors.New(msg)} }

func benchBackendCommand() *cli.Command {
	return &cli.Command{
		Name:  "backend",
		Usage: "report the backend's plugin and API versions, create a client, list its devices and run one small graph on each",
		Flags: []cli.Flag{backendFlag(),
			&cli.IntFlag{Name: "devices", Usage: "CPU devices an XLA CPU plugin creates (its cpu_device_count; default: the plugin's, 4)"}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			if n := cmd.Int("devices"); n < 0 {
				return usageError{fmt.Errorf("%s: --devices %d: want ≥ 1", cmd.FullName(), n)}
			}
			res, err := bench.Backend(backend.Resolve(cmd.String("backend")), int(cmd.Int("devices")), cmd.Root().ErrWriter)
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return bench.WriteJSON(cmd.Root().Writer, res)
		},
	}
}

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
			if err := checkTokens("--rows × --len", rows, n); err != nil {
				return usageError{fmt.Errorf("%s: %w", cmd.FullName(), err)}
			}
			start := cmd.Int("completion-start")
			if start < 0 {
				start = n / 4
			}
			return json.NewEncoder(cmd.Root().Writer).Encode(bench.Inputs(vocab, rows, n, start, cmd.Uint64("seed")))
		},
	}
}

func benchDecodeCommand() *cli.Command {
	return &cli.Command{
		Name:  "decode",
		Usage: "time batched greedy decoding with the KV cache (tokens/s per batch size)",
		Flags: append(benchModelFlags("bfloat16"),
			&cli.StringFlag{Name: "batch", Value: "1,64,256", Usage: "comma-separated batch sizes"},
			&cli.IntFlag{Name: "prompt-len", Value: 64, Usage: "prompt tokens per row"},
			&cli.IntFlag{Name: "new-tokens", Value: 64, Usage: "tokens generated per row (EOS ignored)"},
			&cli.IntFlag{Name: "decode-steps-per-call", Value: 1, Usage: "decode steps per execution of the decode graph (unrolled)"},
		),
		Action: benchWorkload("decode", false, func(cmd *cli.Command) (bench.DecodeParams, error) {
			batches, err := bench.ParseInts(cmd.String("batch"))
			if err != nil {
				return bench.DecodeParams{}, benchUsage("--batch: " + err.Error())
			}
			p := bench.DecodeParams{Batches: batches, PromptLen: cmd.Int("prompt-len"), NewTokens: cmd.Int("new-tokens"), Seed: cmd.Uint64("seed"),
				StepsPerCall: cmd.Int("decode-steps-per-call")}
			if p.PromptLen < 1 || p.NewTokens < 2 || p.StepsPerCall < 1 {
				return p, benchUsage("need --prompt-len ≥ 1, --new-tokens ≥ 2 and --decode-steps-per-call ≥ 1")
			}
			for _, b := range batches {
				if err := checkTokens("--batch × (--prompt-len + --new-tokens)", b, p.PromptLen+p.NewTokens); err != nil {
					return p, benchUsage(err.Error())
				}
			}
			return p, nil
		}, func(cmd *cli.Command, env *bench.Env, p bench.DecodeParams) (*bench.DecodeResult, error) {
			return bench.Decode(env, p)
		}),
	}
}

func benchSFTCommand() *cli.Command {
	return &cli.Command{
		Name:  "sft",
		Usage: "time SFT training steps (the trainer's loss, loop.Optimizer: gradient, clip, AdamW) on rows × seq-len random tokens",
		Flags: append(append(benchModelFlags("bfloat16"),
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "rows per step"},
			&cli.IntFlag{Name: "seq-len", Value: 512, Usage: "tokens per row"},
			&cli.IntFlag{Name: "steps", Value: 3, Usage: "timed steps"},
			&cli.IntFlag{Name: "warmup", Value: 1, Usage: "untimed steps first (the first compiles)"},
			&cli.Float64Flag{Name: "lr", Value: 1e-5, Usage: "AdamW learning rate"},
			&cli.Float64Flag{Name: "peak-tflops", Usage: "the device's peak TFLOP/s for the dtype; > 0 adds MFU to the report"},
		), benchPEFTFlags()...),
		Action: benchWorkload("sft", true, func(cmd *cli.Command) (bench.SFTParams, error) {
			p := bench.SFTParams{Batch: cmd.Int("batch"), SeqLen: cmd.Int("seq-len"), Steps: cmd.Int("steps"), Warmup: cmd.Int("warmup"),
				LR: cmd.Float64("lr"), PeakTFLOPs: cmd.Float64("peak-tflops"), Seed: cmd.Uint64("seed")}
			if p.Batch < 1 || p.SeqLen < 2 || p.Steps < 1 || p.Warmup < 1 {
				return p, benchUsage("need --batch ≥ 1, --seq-len ≥ 2, --steps ≥ 1, --warmup ≥ 1")
			}
			if err := checkTokens("--batch × --seq-len", p.Batch, p.SeqLen); err != nil {
				return p, benchUsage(err.Error())
			}
			return p, nil
		}, func(cmd *cli.Command, env *bench.Env, p bench.SFTParams) (*bench.SFTResult, error) {
			return bench.SFT(env, p)
		}),
	}
}

func benchMemoryCommand() *cli.Command {
	return &cli.Command{
		Name: "memory",
		Usage: "compile one training step of --method on a --preset's shape from shapes alone (no weights allocated) and print XLA's " +
			"buffer assignment: argument, output, temporary and aliased bytes, the state between steps and the total",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "preset", Required: true, Usage: "model shape: " + strings.Join(decoder.PresetNames, ", ")},
			&cli.StringFlag{Name: "method", Value: "sft", Usage: "training method: " + strings.Join(bench.PlanMethods, ", ")},
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "per_device_train_batch_size (pairs for dpo and reward)"},
			&cli.IntFlag{Name: "seq-len", Usage: "tokens per row (grpo: prompt and completion); 0 = the method's TRL default (max_length 1024; grpo max_prompt_length + max_completion_length, 512 + 256)"},
			&cli.StringFlag{Name: "dtype", Value: "bfloat16", Usage: "compute dtype: float32 or bfloat16 (float32 masters and AdamW state either way)"},
			&cli.BoolFlag{Name: "gradient-checkpointing", Value: true, Usage: "recompute each layer's activations and the LM head's logits in the backward pass (TRL's default; --gradient-checkpointing=false keeps them)"},
			backendFlag(),
			&cli.BoolFlag{Name: "json", Usage: "print the result as JSON on one line (default: indented)"},
		}, benchPEFTFlags()...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			dtype, err := decoder.ParseDType(cmd.String("dtype"))
			if err != nil {
				return usageError{fmt.Errorf("%s: --dtype: %w", cmd.FullName(), err)}
			}
			if _, err := decoder.Preset(cmd.String("preset")); err != nil {
				return usageError{fmt.Errorf("%s: --preset: %w", cmd.FullName(), err)}
			}
			if !slices.Contains(bench.PlanMethods, cmd.String("method")) {
				return usageError{fmt.Errorf("%s: --method %q is not planned; valid: %s", cmd.FullName(), cmd.String("method"), strings.Join(bench.PlanMethods, ", "))}
			}
			if cmd.Int("batch") < 1 || cmd.Int("seq-len") < 0 || cmd.Int("seq-len") == 1 {
				return usageError{fmt.Errorf("%s: need --batch ≥ 1 and --seq-len ≥ 2 (or 0, the method's default)", cmd.FullName())}
			}
			if conf := backend.Resolve(cmd.String("backend")); !backend.IsXLA(conf) {
				return fmt.Errorf("%s: backend %s has no memory plans; use an XLA backend (--backend xla:cpu plans on this machine)", cmd.FullName(), conf)
			}
			b, err := newBackend(cmd.Root().ErrWriter, cmd.String("backend"))
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			defer b.Finalize()
			res, err := bench.PlanStep(b, bench.MemoryParams{Preset: cmd.String("preset"), Method: cmd.String("method"), Batch: int(cmd.Int("batch")),
				SeqLen: int(cmd.Int("seq-len")), DType: dtype, LoRA: benchLoRAConfig(cmd), GradientCheckpointing: cmd.Bool("gradient-checkpointing")})
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			res.Backend = backend.Resolve(cmd.String("backend"))
			write := bench.WriteJSON
			if cmd.Bool("json") {
				write = bench.WriteJSONLine
			}
			return write(cmd.Root().Writer, res)
		},
	}
}

func benchGRPOCommand() *cli.Command {
	return &cli.Command{
		Name: "grpo",
		Usage: "time one GRPO step: sample prompts × generations completions, reward, group advantages, " +
			"clipped-surrogate AdamW updates on micro-batches (the trainer's loss and optimizer)",
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
		Action: benchWorkload("grpo", true, func(cmd *cli.Command) (bench.GRPOParams, error) {
			p := bench.GRPOParams{Prompts: cmd.Int("prompts"), Generations: cmd.Int("generations"), PromptLen: cmd.Int("prompt-len"),
				NewTokens: cmd.Int("new-tokens"), MicroBatch: cmd.Int("micro-batch"), Temperature: cmd.Float64("temperature"),
				LR: cmd.Float64("lr"), PeakTFLOPs: cmd.Float64("peak-tflops"), Seed: cmd.Uint64("seed"), Reward: bench.EvenTokenFraction}
			if p.Prompts < 1 || p.Generations < 2 || p.PromptLen < 1 || p.NewTokens < 2 || p.MicroBatch < 1 || p.Temperature <= 0 {
				return p, benchUsage("need --prompts ≥ 1, --generations ≥ 2, --prompt-len ≥ 1, --new-tokens ≥ 2, --micro-batch ≥ 1, --temperature > 0")
			}
			if err := checkTokens("--prompts × --generations × (--prompt-len + --new-tokens)", p.Prompts, p.Generations, p.PromptLen+p.NewTokens); err != nil {
				return p, benchUsage(err.Error())
			}
			return p, nil
		}, func(cmd *cli.Command, env *bench.Env, p bench.GRPOParams) (*bench.GRPOResult, error) {
			return bench.GRPO(env, p)
		}),
	}
}

func benchSampleCommand() *cli.Command {
	return &cli.Command{
		Name:  "sample",
		Usage: "generate with every sampler variant on --backend and on the pure-Go backend, and compare the tokens",
		Flags: append(benchModelFlags("float32"),
			&cli.StringFlag{Name: "reference-backend", Value: backend.PureGo, Usage: "backend the tokens are compared with"},
			&cli.IntFlag{Name: "rows", Value: 4, Usage: "prompts (≥ 1)"},
			&cli.IntFlag{Name: "prompt-len", Value: 8, Usage: "tokens per prompt (≥ 1)"},
			&cli.IntFlag{Name: "new-tokens", Value: 16, Usage: "tokens generated per row (≥ 1; EOS ignored)"},
		),
		Action: benchWorkload("sample", false, func(cmd *cli.Command) (bench.SampleParams, error) {
			p := bench.SampleParams{Rows: cmd.Int("rows"), PromptLen: cmd.Int("prompt-len"), NewTokens: cmd.Int("new-tokens"), Seed: cmd.Uint64("seed")}
			if p.Rows < 1 || p.PromptLen < 1 || p.NewTokens < 1 {
				return p, benchUsage("need --rows, --prompt-len and --new-tokens ≥ 1")
			}
			if err := checkTokens("--rows × (--prompt-len + --new-tokens)", p.Rows, p.PromptLen+p.NewTokens); err != nil {
				return p, benchUsage(err.Error())
			}
			return p, nil
		}, func(cmd *cli.Command, env *bench.Env, p bench.SampleParams) (*bench.SampleResult, error) {
			p.ReferenceName = backend.Resolve(cmd.String("reference-backend"))
			ref, err := backend.New(p.ReferenceName)
			if err != nil {
				return nil, fmt.Errorf("--reference-backend: %w", err)
			}
			defer ref.Finalize()
			p.Reference = ref
			return bench.Sample(env, p)
		}),
	}
}

// benchParityParams are bench parity's flags, the batch read from --input.
type benchParityParams struct {
	batch *decoder.Batch
	steps int
	lr    float64
}

func benchParityCommand() *cli.Command {
	return &cli.Command{
		Name: "parity",
		Usage: "AdamW steps of the training loop on one --input batch (mean NLL of its scored tokens): " +
			"loss and gradient norm per step, to compare with PyTorch",
		Flags: append(benchModelFlags("float32"),
			&cli.StringFlag{Name: "input", Required: true, Usage: "batch JSON file {input_ids, attention_mask, completion_start}"},
			&cli.IntFlag{Name: "steps", Value: 5, Usage: "optimizer steps (≥ 1)"},
			&cli.Float64Flag{Name: "lr", Value: 1e-4, Usage: "AdamW learning rate (constant)"},
		),
		Action: benchWorkload("parity", true, func(cmd *cli.Command) (benchParityParams, error) {
			p := benchParityParams{steps: cmd.Int("steps"), lr: cmd.Float64("lr")}
			if p.steps < 1 || !(p.lr > 0) {
				return p, benchUsage("need --steps ≥ 1 and --lr > 0")
			}
			var err error
			p.batch, _, err = decoder.ReadBatchJSON(cmd.String("input"))
			return p, err
		}, func(cmd *cli.Command, env *bench.Env, p benchParityParams) (*bench.ParityResult, error) {
			if err := p.batch.Validate(env.Config.VocabSize); err != nil {
				return nil, fmt.Errorf("%s: %w", cmd.String("input"), err)
			}
			return bench.Parity(env, p.batch, p.steps, p.lr)
		}),
	}
}

func benchReportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write the gpu-check report (JSON) from stage records and print a summary",
		// --info values hold commas (nvidia-smi's CSV line, ptxas's version): one flag, one value.
		DisableSliceFlagSeparator: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "stages", Required: true, Usage: "JSON lines, one per stage: {name, status, rc, seconds, result, note}"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "report file to write"},
			&cli.StringSliceFlag{Name: "info", Usage: "KEY=VALUE recorded under info (repeatable)"},
			&cli.Float64Flag{Name: "tol-float32", Value: 2e-3, Usage: "largest accepted |Δ log-prob| in float32"},
			&cli.Float64Flag{Name: "tol-bfloat16", Value: 0.15, Usage: "largest accepted |Δ log-prob| in bfloat16"},
			&cli.StringFlag{Name: "probe-expected", Usage: "expected score output (JSON) of the probe stage, e.g. the tiny fixture's float64 reference"},
			&cli.Float64Flag{Name: "tol-probe", Value: 1e-4, Usage: "largest accepted |Δ log-prob| of the probe against --probe-expected"},
			&cli.BoolFlag{Name: "strict", Usage: "exit with status 1 when a stage failed or a check did not pass"},
			&cli.StringFlag{Name: "stopped", Usage: "why the run stopped after its first stages (the backend or the probe failed); empty when it did not"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			info := map[string]string{}
			for _, kv := range cmd.StringSlice("info") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usageError{fmt.Errorf("%s: --info %q: want KEY=VALUE", cmd.FullName(), kv)}
				}
				info[k] = v
			}
			rep, err := bench.BuildReport(cmd.String("stages"), info, map[string]float64{
				"float32": cmd.Float64("tol-float32"), "bfloat16": cmd.Float64("tol-bfloat16")})
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			if rep.Stopped = cmd.String("stopped"); rep.Stopped != "" {
				rep.OK = false
			}
			if path := cmd.String("probe-expected"); path != "" {
				if err := rep.CheckProbe(path, cmd.Float64("tol-probe")); err != nil {
					return fmt.Errorf("%s: %w", cmd.FullName(), err)
				}
			}
			if err := rep.Write(cmd.String("out")); err != nil {
				return err
			}
			bench.PrintSummary(cmd.Root().Writer, rep)
			if cmd.Bool("strict") && !rep.OK {
				return errors.New("not every stage passed (see the report)")
			}
			return nil
		},
	}
}
