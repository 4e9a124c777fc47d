package main

// `posttrain convert FILE.gguf --out DIR`: a llama.cpp GGUF (architecture llama, e.g. SmolLM2)
// as a HF transformers checkpoint the other commands read.

import (
	"context"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/gguf"
)

// convertConfig holds the flags of `posttrain convert`.
type convertConfig struct {
	File, Out, DType string
	Overwrite        bool // replace a model posttrain wrote at Out
}

func init() {
	addCommand(&cli.Command{
		Name:      "convert",
		Usage:     "convert a GGUF file (architectures llama, qwen2, qwen3, gemma3) to a HF checkpoint",
		ArgsUsage: "FILE.gguf",
		Description: "Dequantises every tensor to float32 (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K,\n" +
			"Q5_K, Q6_K), renames them to the family's HF names (llama.cpp's Q/K row permutation undone\n" +
			"for llama, Gemma's stored norm +1 undone), and writes the weights in --dtype, config.json and\n" +
			"generation_config.json from the metadata, and tokenizer.json / tokenizer_config.json\n" +
			"(vocabulary, merges, special tokens, chat template; byte-level BPE or SentencePiece) rebuilt\n" +
			"from tokenizer.ggml.*. Quantisation error stays: the result is the GGUF's model, not the\n" +
			"original checkpoint.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Required: true, Usage: "checkpoint directory to write: new or empty, or (with --overwrite) one posttrain wrote"},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace the model posttrain wrote at --out before (only its files; anything else there stays)"},
			&cli.StringFlag{Name: "dtype", Value: "float32", Usage: "stored dtype: float32, bfloat16 or float16"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usageError{fmt.Errorf("%s: want one GGUF file, got %d arguments", cmd.FullName(), cmd.Args().Len())}
			}
			c := convertConfig{File: cmd.Args().First(), Out: cmd.String("out"), DType: cmd.String("dtype"), Overwrite: cmd.Bool("overwrite")}
			if err := runConvert(c, cmd.Root().Writer); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

func runConvert(c convertConfig, w io.Writer) error {
	if err := checkOutsideGGUFCache("--out", c.Out); err != nil {
		return err
	}
	if err := checkpoint.CheckOutside("--out", c.Out, []checkpoint.Input{{Name: "the GGUF file", Path: c.File}}); err != nil {
		return err
	}
	res, err := gguf.Convert(c.File, c.Out, gguf.ConvertOptions{DType: c.DType, Overwrite: c.Overwrite, WrittenBy: "posttrain convert"})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %s: %s → %s, %d tensors, %d parameters, vocabulary %d\n",
		c.Out, res.Summary, res.Config.ModelType, res.Tensors, res.Config.NumParameters(), res.Config.VocabSize)
	return err
}
