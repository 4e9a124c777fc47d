package main

// `posttrain data`: make and check datasets in TRL's formats. `data mult` writes the course's
// multiplication task; `data check` validates a dataset file; `data rewards` lists the named
// reward functions a GRPO run can use.

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/extreward"
	"github.com/posttrain/posttrain/data/mult"
)

func init() {
	addCommand(&cli.Command{
		Name:  "data",
		Usage: "make and check datasets (TRL formats, JSONL)",
		Commands: []*cli.Command{
			{
				Name:  "mult",
				Usage: "write the course's multiplication task (a×b, a, b ∈ [2,19]) as conversational JSONL rows",
				Description: "sft: prompt/completion; dpo: prompt/chosen/rejected (the course's make_pairs); " +
					"kto: prompt/completion/label, two rows per problem (correct then wrong); " +
					"grpo: prompt plus an \"answer\" column (the course's make_dataset). The same --seed gives the course's rows.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "kind", Required: true, Usage: "sft, dpo, kto or grpo"},
					&cli.IntFlag{Name: "n", Value: 512, Usage: "number of problems (kto writes 2 rows per problem)"},
					&cli.Int64Flag{Name: "seed", Value: 0, Usage: "seed of Python's random.Random"},
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output JSONL file (default: standard output)"},
				},
				Action: dataMultAction,
			},
			{
				Name:      "check",
				Usage:     "validate a dataset file and print its format and row count",
				ArgsUsage: "FILE.jsonl|FILE.json ...",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "format", Value: "auto", Usage: "auto, language_modeling, prompt_completion, preference, unpaired or prompt_only"},
					&cli.StringFlag{Name: "tokenizer", Usage: "also render conversational rows with this chat template (tokenizer_config.json or model directory) and reject doubled special tokens"},
				},
				Action: dataCheckAction,
			},
			{
				Name:  "rewards",
				Usage: "list the named reward functions",
				Action: func(ctx context.Context, cmd *cli.Command) error {
					_, err := fmt.Fprintln(cmd.Root().Writer, strings.Join(slices.Sorted(slices.Values(append(data.RewardNames(), extreward.TRLRewardNames()...))), "\n"))
					return err
				},
			},
		},
	})
}

func dataMultAction(ctx context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() > 0 {
		return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
	}
	kind, err := mult.ParseKind(cmd.String("kind"))
	if err != nil {
		return usageError{fmt.Errorf("%s: --kind: %w", cmd.FullName(), err)}
	}
	n := cmd.Int("n")
	if n < 1 {
		return usageError{fmt.Errorf("%s: --n must be ≥ 1, got %d", cmd.FullName(), n)}
	}
	format, rows, err := mult.Rows(kind, n, cmd.Int64("seed"))
	if err != nil {
		return fmt.Errorf("%s: %w", cmd.FullName(), err)
	}
	if err := writeDataRows(cmd.String("output"), cmd.Root().Writer, format, rows); err != nil {
		return fmt.Errorf("%s: %w", cmd.FullName(), err)
	}
	return nil
}

// writeDataRows writes JSONL to path, or to stdout when path is "" or "-".
func writeDataRows(path string, stdout io.Writer, format data.Format, rows []data.Row) error {
	if path == "" || path == "-" {
		return data.WriteJSONL(stdout, format, rows)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := data.WriteJSONL(f, format, rows); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func dataCheckAction(ctx context.Context, cmd *cli.Command) error {
	if cmd.Args().Len() == 0 {
		return usageError{fmt.Errorf("%s: missing dataset file", cmd.FullName())}
	}
	format, err := data.ParseFormat(cmd.String("format"))
	if err != nil {
		return usageError{fmt.Errorf("%s: --format: %w", cmd.FullName(), err)}
	}
	var tpl *chat.Template
	if p := cmd.String("tokenizer"); p != "" {
		if tpl, err = chat.Load(p); err != nil {
			return fmt.Errorf("%s: %w", cmd.FullName(), err)
		}
	}
	for _, path := range cmd.Args().Slice() {
		d, err := data.ReadFile(path, format)
		if err == nil && tpl != nil {
			err = checkRendered(tpl, d)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", cmd.FullName(), err)
		}
		kind := "standard"
		if d.Conversational {
			kind = "conversational"
		}
		extra := ""
		if d.ImplicitPrompt {
			extra = ", implicit prompt"
		}
		if cols := data.Columns(d.Rows); len(cols) > 0 {
			extra += ", columns " + strings.Join(slices.Sorted(maps.Keys(cols)), ",")
		}
		fmt.Fprintf(cmd.Root().Writer, "%s: %s, %s, %d rows%s\n", path, d.Format, kind, len(d.Rows), extra)
	}
	return nil
}

// checkRendered applies the chat template to a conversational dataset as a trainer would and
// rejects rows whose rendered text doubles a special token.
func checkRendered(tpl *chat.Template, d *data.Dataset) error {
	std, err := data.ApplyChatTemplate(tpl, d, chat.Options{})
	if err != nil {
		return err
	}
	specials := tpl.SpecialStrings()
	for _, r := range std.Rows {
		p := r.Prompt.String
		for _, text := range []string{r.Text.String, p + r.Completion.String, p + r.Chosen.String, p + r.Rejected.String} {
			if err := chat.CheckDoubledText(text, specials); err != nil {
				return fmt.Errorf("%s:%d: %w", d.Path, r.Line, err)
			}
		}
	}
	return nil
}
