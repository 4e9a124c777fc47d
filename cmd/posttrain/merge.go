package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/lora"
)

// mergeConfig holds the flags of `posttrain merge`.
type mergeConfig struct {
	Model, Adapter, Out, DType string
	Overwrite                  bool // replace a model posttrain wrote at Out
}

func init() {
	addCommand(&cli.Command{
		Name:  "merge",
		Usage: "fold a PEFT LoRA adapter into its base model (PEFT's merge_and_unload) and write a plain HF checkpoint",
		Description: "Reads --model (float32), adds s·B·A to every adapted layer (s = lora_alpha/r, or /√r with\n" +
			"use_rslora), replaces the modules_to_save tensors by their trained copies, and writes the\n" +
			"weights, config.json, generation_config.json and the tokenizer (the adapter directory's, else\n" +
			"the base's) to --output-dir. An adapter that does not fit the base is an error naming the tensor.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "base checkpoint directory or HuggingFace repo id"},
			&cli.StringFlag{Name: "adapter", Required: true, Usage: "PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors)"},
			&cli.StringFlag{Name: "output-dir", Required: true, Usage: "checkpoint directory to write: new or empty, or (with --overwrite) one posttrain wrote; never the base or the adapter"},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace the model posttrain wrote at --output-dir before (only its files; anything else there stays)"},
			&cli.StringFlag{Name: "dtype", Value: "float32", Usage: "stored dtype: float32, bfloat16 or float16"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			c := mergeConfig{Model: cmd.String("model"), Adapter: cmd.String("adapter"), Out: cmd.String("output-dir"), DType: cmd.String("dtype"), Overwrite: cmd.Bool("overwrite")}
			if err := runMerge(ctx, c, cmd.Root().Writer); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

func runMerge(ctx context.Context, c mergeConfig, w io.Writer) error {
	dir, err := resolveModel(ctx, c.Model)
	if err != nil {
		return err
	}
	inputs := []checkpoint.Input{{Name: "the base model (--model)", Path: dir}, {Name: "the adapter (--adapter)", Path: c.Adapter}}
	if err := checkOutsideGGUFCache("--output-dir", c.Out); err != nil {
		return err
	}
	if err := checkpoint.CheckOutside("--output-dir", c.Out, inputs); err != nil {
		return err
	}
	mctx, cfg, a, err := loadMerged(dir, c.Adapter)
	if err != nil {
		return err
	}
	tok, err := mergeTokenizer(dir, cfg, c.Adapter)
	if err != nil {
		return err
	}
	if err := decoder.Save(c.Out, mctx, cfg, decoder.SaveOptions{DType: c.DType, TokenizerPath: tok, BaseDir: dir,
		Overwrite: c.Overwrite, WrittenBy: "posttrain merge"}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "merge: %d adapted layers and %d modules_to_save tensors of %s merged into %s; wrote %s\n",
		len(a.Modules()), len(a.Saved()), c.Adapter, c.Model, c.Out)
	return err
}

// loadMerged loads the checkpoint in dir in float32 and, when adapter is set, folds the PEFT LoRA
// adapter there into it (PEFT's merge_and_unload: W + s·B·A, the modules_to_save copies): the
// model `posttrain merge` writes and `posttrain export gguf --adapter` exports. a is nil without
// an adapter.
func loadMerged(dir, adapter string) (mctx *mlctx.Context, cfg *decoder.Config, a *lora.Adapter, err error) {
	if mctx, cfg, err = decoder.Load(dir, dtypes.Float32); err != nil {
		return nil, nil, nil, err
	}
	if adapter == "" {
		return mctx, cfg, nil, nil
	}
	if a, err = lora.Load(mctx, cfg, adapter); err != nil {
		return nil, nil, nil, err
	}
	if err := a.Merge(mctx); err != nil {
		return nil, nil, nil, err
	}
	return mctx, cfg, a, nil
}

// mergeTokenizer is the tokenizer merge writes: the adapter directory's when it has one (PEFT
// saves the tokenizer a run added tokens to there), else the base's. An adapter's tokenizer with
// more tokens than the base's embedding has rows is refused, naming both sizes: the merged
// checkpoint would hand ids the model has no embedding for (it was written as is).
func mergeTokenizer(base string, cfg *decoder.Config, adapter string) (string, error) {
	if _, err := os.Stat(filepath.Join(adapter, "tokenizer.json")); err != nil {
		return base, nil
	}
	tok, err := tokenizer.Load(adapter)
	if err != nil {
		return "", fmt.Errorf("adapter %s: %w", adapter, err)
	}
	if n := tok.VocabSize(); n > cfg.VocabSize {
		return "", fmt.Errorf("adapter %s: its tokenizer.json has %d tokens, more than the %d rows of the base's embedding (vocab_size in %s): the merged model would have no embedding for ids %d..%d; resize the base's embedding or merge with the base's tokenizer (remove the adapter's tokenizer files)",
			adapter, n, cfg.VocabSize, filepath.Join(base, "config.json"), cfg.VocabSize, n-1)
	}
	return adapter, nil
}
