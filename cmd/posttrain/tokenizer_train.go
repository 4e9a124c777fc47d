package main

// `posttrain tokenizer-train`: learn a byte-level BPE tokenizer of the Qwen2 family from a text
// file (or the built-in multiplication demo corpus) and write it in HuggingFace layout.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data/bpetrain"
	"github.com/posttrain/posttrain/internal/checkpoint"
)

// tokenizerTrainConfig holds the flags of `posttrain tokenizer-train`.
type tokenizerTrainConfig struct {
	bpetrain.Config
	Corpus    string // text file, read line by line as HuggingFace's tokenizer.train(files)
	Demo      bool   // bpetrain.DemoCorpus instead of a file
	Output    string // directory
	Overwrite bool   // replace the tokenizer files already in Output
}

func init() {
	addCommand(&cli.Command{
		Name:      "tokenizer-train",
		Usage:     "train a byte-level BPE tokenizer (Qwen2 pipeline, ChatML special tokens) and write it in HuggingFace layout",
		UsageText: "posttrain tokenizer-train --vocab-size N [--min-frequency F] (--corpus FILE.txt | --demo) -o DIR",
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "vocab-size", Value: bpetrain.DemoVocabSize, Usage: "tokens in all: 256 bytes + merges + 3 special tokens (training stops earlier when no pair is left)"},
			&cli.IntFlag{Name: "min-frequency", Value: bpetrain.DemoMinFrequency, Usage: "do not merge a pair seen fewer times"},
			&cli.StringFlag{Name: "corpus", Usage: "UTF-8 text file to learn from"},
			&cli.BoolFlag{Name: "demo", Usage: "learn from the built-in corpus: multiplication conversations in the chat template, and the numbers 0-400"},
			&cli.IntFlag{Name: "model-max-length", Value: bpetrain.DefaultModelMaxLength, Usage: "tokenizer_config.json model_max_length"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Required: true, Usage: "directory for tokenizer.json, tokenizer_config.json, vocab.json, merges.txt (a tokenizer already there needs --overwrite)"},
			&cli.BoolFlag{Name: "overwrite", Usage: "replace the tokenizer files already in -o DIR (only those four files)"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			c := tokenizerTrainConfig{
				Config: bpetrain.Config{VocabSize: cmd.Int("vocab-size"), MinFrequency: cmd.Int("min-frequency"),
					ModelMaxLength: cmd.Int("model-max-length")},
				Corpus: cmd.String("corpus"), Demo: cmd.Bool("demo"), Output: cmd.String("output"),
				Overwrite: cmd.Bool("overwrite"),
			}
			if err := c.validate(cmd); err != nil {
				return usageError{fmt.Errorf("%s: %w", cmd.FullName(), err)}
			}
			if err := runTokenizerTrain(c, cmd.Root().Writer); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

func (c tokenizerTrainConfig) validate(cmd *cli.Command) error {
	switch {
	case cmd.Args().Len() > 0:
		return fmt.Errorf("unexpected argument %q", cmd.Args().First())
	case c.Output == "":
		return fmt.Errorf("-o DIR is required")
	case c.Demo == (c.Corpus != ""):
		return fmt.Errorf("give exactly one of --corpus FILE and --demo")
	case c.ModelMaxLength < 1:
		return fmt.Errorf("--model-max-length must be ≥ 1, got %d", c.ModelMaxLength)
	}
	if err := c.Config.Validate(); err != nil {
		return fmt.Errorf("--vocab-size/--min-frequency: %w", err)
	}
	return nil
}

// runTokenizerTrain feeds the corpus, trains, saves and prints one summary line to w.
func runTokenizerTrain(c tokenizerTrainConfig, w io.Writer) error {
	if err := checkTokenizerOutput(c); err != nil {
		return err
	}
	tr, err := bpetrain.New(c.Config)
	if err != nil {
		return err
	}
	if c.Demo {
		texts, err := bpetrain.DemoCorpus()
		if err != nil {
			return err
		}
		for _, s := range texts {
			if err := tr.Feed(s); err != nil {
				return err
			}
		}
	} else {
		f, err := os.Open(c.Corpus)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := tr.FeedLines(f, c.Corpus); err != nil {
			return err
		}
	}
	res := tr.Train()
	if err := res.Save(c.Output); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "wrote %s: %d tokens (%d model + %d special), %d merges, from %d distinct words\n",
		c.Output, res.VocabSize(), len(res.Tokens), len(res.Added), len(res.Merges), tr.Words())
	return err
}

// checkTokenizerOutput refuses, before training, an output directory that holds the corpus or
// (without --overwrite) tokenizer files that saving would replace, naming them.
func checkTokenizerOutput(c tokenizerTrainConfig) error {
	if err := checkpoint.CheckOutside("-o", c.Output, []checkpoint.Input{{Name: "--corpus", Path: c.Corpus}}); err != nil {
		return err
	}
	if c.Overwrite {
		return nil
	}
	var there []string
	for _, name := range bpetrain.Files {
		if _, err := os.Lstat(filepath.Join(c.Output, name)); err == nil {
			there = append(there, name)
		}
	}
	if len(there) > 0 {
		return fmt.Errorf("-o %s already holds %s: replace them with --overwrite, or choose another directory", c.Output, strings.Join(there, ", "))
	}
	return nil
}
