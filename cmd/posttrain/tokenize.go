package main

// `posttrain tokenize`: text → token ids (one JSON string per input line → one JSON array per
// output line) and, with --decode, ids → text, exactly as HuggingFace's tokenizer does. By
// default it is tokenizer.encode(text, add_special_tokens=False); --add-special-tokens gives
// transformers' default encode, with what the post-processor adds (the BOS of Llama 3 and Gemma 3).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data/tokenizer"
)

// tokenizeConfig holds the flags of `posttrain tokenize`.
type tokenizeConfig struct {
	Tokenizer     string // tokenizer.json (or .json.gz) or a model directory
	Input         string // "" or "-": standard input
	Decode        bool   // ids → text
	NoAddedTokens bool   // encode without matching added tokens (HF ids_plain)
	AddSpecial    bool   // encode: add the post-processor's special tokens (HF add_special_tokens=True)
	SkipSpecial   bool   // decode: drop special tokens
}

func init() {
	addCommand(&cli.Command{
		Name:  "tokenize",
		Usage: "encode JSON strings to token ids (one per line), or --decode JSON id arrays to strings",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "tokenizer", Required: true, Usage: "tokenizer.json, a model directory holding one, or a GGUF file (its tokenizer.* metadata)"},
			&cli.StringFlag{Name: "input", Usage: "input file (default: standard input)"},
			&cli.BoolFlag{Name: "decode", Usage: "read a JSON array of ids per line and print the decoded JSON string"},
			&cli.BoolFlag{Name: "no-added-tokens", Usage: "encode: do not match added tokens such as <|im_end|> in the text"},
			&cli.BoolFlag{Name: "add-special-tokens", Usage: "encode: add the special tokens the tokenizer's post-processor adds (the BOS of Llama 3 and Gemma 3), as transformers' default encode does"},
			&cli.BoolFlag{Name: "skip-special-tokens", Usage: "decode: drop special tokens"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			c := tokenizeConfig{Tokenizer: cmd.String("tokenizer"), Input: cmd.String("input"), Decode: cmd.Bool("decode"),
				NoAddedTokens: cmd.Bool("no-added-tokens"), AddSpecial: cmd.Bool("add-special-tokens"), SkipSpecial: cmd.Bool("skip-special-tokens")}
			for _, f := range []struct {
				name string
				on   bool
			}{{"--no-added-tokens", c.NoAddedTokens}, {"--add-special-tokens", c.AddSpecial}} {
				if c.Decode && f.on {
					return usageError{fmt.Errorf("%s: %s applies to encoding, not --decode", cmd.FullName(), f.name)}
				}
			}
			if c.NoAddedTokens && c.AddSpecial {
				return usageError{fmt.Errorf("%s: --add-special-tokens and --no-added-tokens cannot be combined (the special tokens are added tokens)", cmd.FullName())}
			}
			if !c.Decode && c.SkipSpecial {
				return usageError{fmt.Errorf("%s: --skip-special-tokens applies to --decode only", cmd.FullName())}
			}
			in := cmd.Root().Reader
			if in == nil {
				in = os.Stdin
			}
			if err := runTokenize(c, in, cmd.Root().Writer); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

// runTokenize loads the tokenizer and converts stdin (or c.Input) line by line to w.
func runTokenize(c tokenizeConfig, stdin io.Reader, w io.Writer) error {
	tok, err := loadTokenizer(c.Tokenizer)
	if err != nil {
		return err
	}
	name := "stdin"
	if c.Input != "" && c.Input != "-" {
		f, err := os.Open(c.Input)
		if err != nil {
			return err
		}
		defer f.Close()
		stdin, name = f, c.Input
	}
	return convertStream(tok, c, name, stdin, w)
}

// convertStream converts each line of in (named name in errors) and prints the results to w.
func convertStream(tok *tokenizer.BPE, c tokenizeConfig, name string, in io.Reader, w io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false) // print "<|im_end|>", not "\u003c|im_end|\u003e"
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", name, err)
		}
		v, lineErr := convertLine(tok, c, bytes.TrimRight(line, "\r\n"))
		if lineErr != nil {
			out.Flush()
			return fmt.Errorf("%s: line %d: %w", name, n, lineErr)
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
		if r.Buffered() == 0 { // interactive use: answer each line as it arrives
			if err := out.Flush(); err != nil {
				return err
			}
		}
	}
	return out.Flush()
}

// convertLine encodes a JSON string to its ids, or (--decode) a JSON array of ids to its text.
func convertLine(tok *tokenizer.BPE, c tokenizeConfig, line []byte) (any, error) {
	if string(bytes.TrimSpace(line)) == "null" {
		return nil, errors.New("null is not a JSON string or array")
	}
	if c.Decode {
		var ids []int
		if err := json.Unmarshal(line, &ids); err != nil {
			return nil, fmt.Errorf("want a JSON array of token ids: %w", err)
		}
		for _, id := range ids {
			if _, ok := tok.IDToToken(id); !ok {
				return nil, fmt.Errorf("token id %d is not in the vocabulary (size %d)", id, tok.VocabSize())
			}
		}
		return tok.Decode(ids, c.SkipSpecial), nil
	}
	var text string
	if err := json.Unmarshal(line, &text); err != nil {
		return nil, fmt.Errorf("want a JSON string: %w", err)
	}
	switch {
	case c.NoAddedTokens:
		return tok.EncodePlain(text), nil
	case c.AddSpecial:
		return tok.EncodeSpecial(text), nil
	}
	return tok.Encode(text), nil
}
