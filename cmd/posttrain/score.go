package main

// `posttrain score`: run a checkpoint of any decoder family (decoder.FamilyNames) on a token batch and print per-token log-probs, the
// loss, logits checksums and (--grad) gradient norms as JSON, in the layout of the qwen2-tiny
// expected files (models/testdata/qwen2-tiny).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/lora"
)

// scoreConfig holds the flags of `posttrain score`.
type scoreConfig struct {
	Model        string // local directory or HF repo id
	Input        string // batch JSON: input_ids, attention_mask, completion_start, max_new_tokens
	Grad         bool
	Gen          int // greedy new tokens per row, cached and uncached (0: none)
	ComputeDType string
	Backend      string
	Adapter      string // a PEFT LoRA adapter directory applied to Model ("" = none)
}

// scoreOutput is the printed JSON; later sections (generation) are added as omitempty fields.
type scoreOutput struct {
	*decoder.Report
	Generation *scoreGeneration `json:"generation,omitempty"`
}

func init() {
	addCommand(&cli.Command{
		Name:  "score",
		Usage: "score a token batch with a " + decoder.FamilyNames() + " checkpoint: per-token log-probs, loss, logits checksums, gradient norms (JSON)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "checkpoint directory or HuggingFace repo id"},
			&cli.StringFlag{Name: "input", Required: true, Usage: "batch JSON file {input_ids, attention_mask, completion_start}"},
			&cli.BoolFlag{Name: "grad", Usage: "also print the L2 norm of the loss gradient per tensor (grad.l2, grad.global_l2)"},
			&cli.IntFlag{Name: "gen", Usage: "also generate `N` greedy tokens per row with and without the KV cache (generation.tokens_cache, tokens_nocache)"},
			&cli.StringFlag{Name: "compute-dtype", Value: "float32", Usage: "dtype of weights and activations: float32 or bfloat16"},
			&cli.StringFlag{Name: "adapter", Usage: "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors) to apply to --model"},
			backendFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			c := scoreConfig{Model: cmd.String("model"), Input: cmd.String("input"), Grad: cmd.Bool("grad"), Gen: cmd.Int("gen"),
				ComputeDType: cmd.String("compute-dtype"), Backend: cmd.String("backend"), Adapter: cmd.String("adapter")}
			if _, err := decoder.ParseDType(c.ComputeDType); err != nil {
				return usageError{fmt.Errorf("%s: --compute-dtype: %w", cmd.FullName(), err)}
			}
			if c.Gen < 0 {
				return usageError{fmt.Errorf("%s: --gen must not be negative, got %d", cmd.FullName(), c.Gen)}
			}
			if err := runScore(ctx, c, cmd.Root().Writer, cmd.Root().ErrWriter); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

// runScore loads the model and the batch, scores it and writes the JSON report to w.
func runScore(ctx context.Context, c scoreConfig, w, errw io.Writer) error {
	dtype, err := decoder.ParseDType(c.ComputeDType)
	if err != nil {
		return err
	}
	batch, _, err := decoder.ReadBatchJSON(c.Input)
	if err != nil {
		return err
	}
	dir, b, err := openModel(ctx, errw, c.Model, c.Backend)
	if err != nil {
		return err
	}
	defer b.Finalize()
	mctx, cfg, err := decoder.Load(dir, dtype)
	if err != nil {
		return err
	}
	if c.Adapter != "" {
		if _, err := lora.Load(mctx, cfg, c.Adapter); err != nil {
			return err
		}
	}
	res, err := decoder.Score(b, mctx, cfg, batch, c.Grad)
	if err != nil {
		return err
	}
	if err := res.Check(batch); err != nil {
		return err
	}
	out := scoreOutput{Report: res.Report(batch)}
	if c.Gen > 0 {
		if out.Generation, err = generateForScore(b, mctx, cfg, batch, c.Gen); err != nil {
			return err
		}
	}
	return json.NewEncoder(w).Encode(out) // one line: pipe through jq to read
}
