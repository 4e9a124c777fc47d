package main

// `posttrain score-reward`: print a reward model's rewards for texts or dataset rows (JSON lines).

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

func init() {
	addCommand(&cli.Command{
		Name:  "score-reward",
		Usage: "print a reward model's rewards: --model DIR (--text T ... | --dataset FILE)",
		Description: "Scores texts with a reward model (a *ForSequenceClassification checkpoint with num_labels 1,\n" +
			"as `posttrain reward` writes) the way its trainer saw them: plain text gets the EOS and the\n" +
			"tokenizer's special tokens, conversations the model's chat template. Prints one JSON line per\n" +
			"text; with a preference dataset, each row's chosen and rejected rewards, then a summary line\n" +
			"with the ranking accuracy (chosen above rejected) and the mean margin.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "reward model checkpoint directory or HuggingFace repo id"},
			&cli.StringSliceFlag{Name: "text", Usage: "a plain text to score (repeatable)"},
			&cli.StringFlag{Name: "dataset", Usage: "JSONL/JSON rows to score: preference (chosen/rejected), language modelling (text/messages) or prompt-completion"},
			&cli.IntFlag{Name: "batch", Value: 8, Usage: "rows per forward pass"},
			&cli.BoolFlag{Name: "bf16", Usage: "bf16 weights and activations"},
			backendFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			texts, path := cmd.StringSlice("text"), cmd.String("dataset")
			if (len(texts) == 0) == (path == "") {
				return usageError{fmt.Errorf("%s: give --text (repeatable) or --dataset, one of them", cmd.FullName())}
			}
			if cmd.Int("batch") < 1 {
				return usageError{fmt.Errorf("%s: --batch must be ≥ 1, got %d", cmd.FullName(), cmd.Int("batch"))}
			}
			if err := runScoreReward(ctx, cmd, texts, path); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

func runScoreReward(ctx context.Context, cmd *cli.Command, texts []string, path string) error {
	var d *data.Dataset
	if path != "" {
		var err error
		if d, err = data.ReadFile(path, data.FormatAuto); err != nil {
			return err
		}
	}
	dir, b, err := openModel(ctx, cmd.Root().ErrWriter, cmd.String("model"), cmd.String("backend"))
	if err != nil {
		return err
	}
	defer b.Finalize()
	s, err := trainable.LoadScorer(b, dir, cmd.Bool("bf16"), cmd.Int("batch"))
	if err != nil {
		return err
	}
	w := cmd.Root().Writer
	if d == nil {
		prompts, answers := make([]data.Text, len(texts)), make([]data.Text, len(texts))
		for i, t := range texts {
			answers[i] = data.Text{String: t}
		}
		rs, err := scoreTexts(s, prompts, answers)
		if err != nil {
			return err
		}
		for i, r := range rs {
			if err := printJSON(w, map[string]any{"text": texts[i], "reward": r}); err != nil {
				return err
			}
		}
		return nil
	}
	return scoreRows(w, s, d)
}

// scoreRows prints the rewards of a dataset's rows and, for preference rows, the summary.
func scoreRows(w io.Writer, s *trainable.Scorer, d *data.Dataset) error {
	var prompts, answers []data.Text
	for _, r := range d.Rows {
		switch d.Format {
		case data.Preference:
			prompts, answers = append(prompts, r.Prompt, r.Prompt), append(answers, r.Chosen, r.Rejected)
		case data.LanguageModeling:
			prompts, answers = append(prompts, data.Text{}), append(answers, r.Text)
		case data.PromptCompletion:
			prompts, answers = append(prompts, r.Prompt), append(answers, r.Completion)
		default:
			return fmt.Errorf("%s: %s rows have no answer to score (want preference, language modelling or prompt-completion rows)", d.Path, d.Format)
		}
	}
	rs, err := scoreTexts(s, prompts, answers)
	if err != nil {
		return fmt.Errorf("%s: %w", d.Path, err)
	}
	if d.Format != data.Preference {
		for i, r := range d.Rows {
			if err := printJSON(w, map[string]any{"line": r.Line, "reward": rs[i]}); err != nil {
				return err
			}
		}
		return nil
	}
	right, margin := 0, 0.0
	for i, r := range d.Rows {
		c, rj := rs[2*i], rs[2*i+1]
		if c > rj {
			right++
		}
		margin += c - rj
		if err := printJSON(w, map[string]any{"line": r.Line, "chosen": c, "rejected": rj}); err != nil {
			return err
		}
	}
	n := len(d.Rows)
	return printJSON(w, map[string]any{"pairs": n, "accuracy": float64(right) / float64(n), "margin": margin / float64(n)})
}

func printJSON(w io.Writer, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

// scoreTexts encodes each prompt and answer as the reward model's trainer did (RewardTrainingIDs:
// its chat template for conversations, the EOS for plain text) and scores them.
func scoreTexts(s *trainable.Scorer, prompts, answers []data.Text) ([]float64, error) {
	rows := make([][]int32, len(prompts))
	for i := range prompts {
		var err error
		if rows[i], err = s.Model.Text.RewardTrainingIDs(prompts[i], answers[i]); err != nil {
			return nil, fmt.Errorf("text %d: %w", i+1, err)
		}
	}
	return s.Score(rows)
}
