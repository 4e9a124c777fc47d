package main

// `posttrain init`: write a randomly initialised checkpoint of any decoder family (decoder.FamilyNames)
// in HuggingFace's layout, for tests, demos and GPU measurements.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/decoder"
)

// initConfig holds the flags of `posttrain init`.
type initConfig struct {
	Preset    string // decoder.PresetNames
	Tokenizer string // tokenizer directory or tokenizer.json[.gz]; sizes the vocabulary
	DType     string // stored dtype: float32, bfloat16, float16
	Seed      uint64
	Out       string
	Overwrite bool // replace a model posttrain wrote at Out
}

func init() {
	addCommand(&cli.Command{
		Name:  "init",
		Usage: "write a randomly initialised " + decoder.FamilyNames() + " checkpoint (HF layout: safetensors, config.json, generation_config.json, tokenizer)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "preset", Required: true, Usage: "model shape: " + strings.Join(decoder.PresetNames, ", ") + " (the -tiny ones keep their family's features at a test size)"},
			&cli.StringFlag{Name: "tokenizer", Usage: "tokenizer directory (tokenizer.json[.gz], tokenizer_config.json) or tokenizer.json[.gz] to copy in, e.g. the family's; the vocabulary and eos/bos ids follow it"},
			&cli.StringFlag{Name: "dtype", Value: "float32", Usage: "stored dtype: float32, bfloat16 or float16"},
			&cli.Uint64Flag{Name: "seed", Value: 0, Usage: "seed of the N(0, initializer_range²) draws"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "checkpoint directory to write: new or empty, or (with --overwrite) one posttrain wrote"},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace the model posttrain wrote at --out before (only its files; anything else there stays)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			c := initConfig{Preset: cmd.String("preset"), Tokenizer: cmd.String("tokenizer"), DType: cmd.String("dtype"),
				Seed: cmd.Uint64("seed"), Out: cmd.String("out"), Overwrite: cmd.Bool("overwrite")}
			if _, err := decoder.Preset(c.Preset); err != nil {
				return usageError{fmt.Errorf("%s: --preset: %w", cmd.FullName(), err)}
			}
			if err := runInit(c, cmd.Root().Writer); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

// runInit builds the config (sized to the tokenizer when given) and writes the checkpoint.
func runInit(c initConfig, w io.Writer) error {
	cfg, err := decoder.Preset(c.Preset)
	if err != nil {
		return err
	}
	if err := checkpoint.CheckOutside("--out", c.Out, []checkpoint.Input{{Name: "--tokenizer", Path: c.Tokenizer}}); err != nil {
		return err
	}
	opts := decoder.SaveOptions{DType: c.DType, TokenizerPath: c.Tokenizer, Overwrite: c.Overwrite, WrittenBy: "posttrain init"}
	if c.Tokenizer != "" {
		tok, err := tokenizer.Load(tokenizerFile(c.Tokenizer))
		if err != nil {
			return err
		}
		// A real model shape keeps its (padded) embedding size when the tokenizer fits in it.
		if !decoder.RealPreset(c.Preset) || tok.VocabSize() > cfg.VocabSize {
			cfg.VocabSize = tok.VocabSize()
		}
		opts.Generation = tokenizerIDs(cfg, tok)
	}
	if err := decoder.InitCheckpoint(c.Out, cfg, c.Seed, opts); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %s: preset %s, %d parameters, vocabulary %d, eos %v, seed %d\n",
		c.Out, c.Preset, cfg.NumParameters(), cfg.VocabSize, cfg.EOSTokenIDs, c.Seed)
	return err
}

// tokenizerFile is path, or its tokenizer.json.gz when path is a directory holding only that.
func tokenizerFile(path string) string {
	if _, err := os.Stat(filepath.Join(path, "tokenizer.json")); err == nil {
		return path
	}
	if gz := filepath.Join(path, "tokenizer.json.gz"); fileExists(gz) {
		return gz
	}
	return path
}

func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}

// tokenizerIDs sets cfg's bos/eos from the tokenizer's special tokens and returns the
// generation_config ids, as Qwen2.5-Instruct has them: eos = tokenizer_config's eos_token, plus
// <|endoftext|> in generation_config when it differs; bos = bos_token, else <|endoftext|>.
func tokenizerIDs(cfg *decoder.Config, tok *tokenizer.BPE) *decoder.GenerationConfig {
	lookup := func(token string) *int {
		if token == "" {
			return nil
		}
		if id, ok := tok.TokenToID(token); ok {
			return &id
		}
		return nil
	}
	tc := tok.Config()
	endOfText := lookup("<|endoftext|>")
	eos := lookup(tc.EOSToken)
	if eos == nil {
		eos = endOfText
	}
	cfg.BOSTokenID = lookup(tc.BOSToken)
	if cfg.BOSTokenID == nil {
		cfg.BOSTokenID = endOfText
	}
	cfg.EOSTokenIDs = nil
	gen := &decoder.GenerationConfig{BOSTokenID: cfg.BOSTokenID, PadTokenID: lookup(tc.PadToken)}
	if eos != nil {
		cfg.EOSTokenIDs = []int{*eos}
		gen.EOSTokenIDs = []int{*eos}
	}
	if endOfText != nil && (eos == nil || *endOfText != *eos) {
		gen.EOSTokenIDs = append(gen.EOSTokenIDs, *endOfText)
	}
	return gen
}
