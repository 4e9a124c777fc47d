package main

// `posttrain eval mult`: greedy exact-match accuracy of a checkpoint on multiplication prompts of
// the course's extras (data/mult), with the model's chat template and the mult_correct verifier.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/gomlx/gomlx/backends"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/apps/answer"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
)

// evalMultConfig holds the flags of `posttrain eval mult`.
type evalMultConfig struct {
	Model        string
	N            int
	Seed         int64
	MaxNewTokens int
	Batch        int
	Backend      string
	JSON         bool
	Adapter      string // a PEFT LoRA adapter directory applied to Model ("" = none)
}

// evalMultResult is what `posttrain eval mult` reports.
type evalMultResult struct {
	Model    string  `json:"model"`
	N        int     `json:"n"`
	Seed     int64   `json:"seed"`
	Correct  int     `json:"correct"`
	Accuracy float64 `json:"accuracy"`
	StdErr   float64 `json:"stderr"` // binomial √(p(1−p)/n)
}

func init() {
	addCommand(&cli.Command{
		Name:  "eval",
		Usage: "evaluate a checkpoint on a task",
		Commands: []*cli.Command{{
			Name:  "mult",
			Usage: "greedy exact-match accuracy on multiplication prompts (mult_correct verifier): --model M --n 200 --seed S",
			Description: "Draws N problems a×b (a, b in 2..19) as the course's make_dataset(N, seed) does, renders the\n" +
				"prompt \"{a}×{b}는 얼마인가요? 숫자 하나로만 답하세요.\" with the model's chat template, answers\n" +
				"greedily (stopping at any end-of-sequence id) and counts answers whose first integer is a·b.\n" +
				"The course trains on seed 0: evaluate on another seed for prompts drawn independently (there\n" +
				"are only 324 distinct problems, so some repeat training ones).",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "model", Required: true, Usage: "checkpoint directory or HuggingFace repo id"},
				&cli.IntFlag{Name: "n", Value: 200, Usage: "number of problems"},
				&cli.IntFlag{Name: "seed", Value: 1, Usage: "seed of the problem draw (the course's training data uses 0)"},
				&cli.IntFlag{Name: "max-new-tokens", Value: 8, Usage: "most tokens generated per answer"},
				&cli.IntFlag{Name: "batch", Value: 64, Usage: "prompts generated together"},
				&cli.StringFlag{Name: "adapter", Usage: "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors) to apply to --model"},
				backendFlag(),
				&cli.BoolFlag{Name: "json", Usage: "print the result as JSON"},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() > 0 {
					return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
				}
				c := evalMultConfig{Model: cmd.String("model"), N: int(cmd.Int("n")), Seed: int64(cmd.Int("seed")),
					MaxNewTokens: int(cmd.Int("max-new-tokens")), Batch: int(cmd.Int("batch")), Backend: cmd.String("backend"), JSON: cmd.Bool("json"),
					Adapter: cmd.String("adapter")}
				if c.N < 1 || c.MaxNewTokens < 1 || c.Batch < 1 {
					return usageError{fmt.Errorf("%s: --n, --max-new-tokens and --batch must be ≥ 1", cmd.FullName())}
				}
				if err := runEvalMult(ctx, c, cmd.Root().Writer, cmd.Root().ErrWriter); err != nil {
					return fmt.Errorf("%s: %w", cmd.FullName(), err)
				}
				return nil
			},
		}},
	})
}

func runEvalMult(ctx context.Context, c evalMultConfig, w, errw io.Writer) error {
	dir, b, err := openModel(ctx, errw, c.Model, c.Backend)
	if err != nil {
		return err
	}
	defer b.Finalize()
	correct, err := evalMult(b, dir, c.Adapter, mult.Problems(c.N, c.Seed), c.MaxNewTokens, c.Batch)
	if err != nil {
		return err
	}
	p := float64(correct) / float64(c.N)
	res := evalMultResult{Model: c.Model, N: c.N, Seed: c.Seed, Correct: correct, Accuracy: p, StdErr: math.Sqrt(p * (1 - p) / float64(c.N))}
	if c.JSON {
		return json.NewEncoder(w).Encode(res)
	}
	_, err = fmt.Fprintf(w, "eval mult: accuracy %.1f%% ± %.1f (%d/%d, seed %d) for %s\n",
		100*res.Accuracy, 100*res.StdErr, res.Correct, res.N, res.Seed, res.Model)
	return err
}

// evalMult answers every problem greedily with the checkpoint in dir (apps/answer) and counts
// the answers the mult_correct verifier accepts.
func evalMult(b backends.Backend, dir, adapter string, problems []mult.Problem, maxNew, batch int) (int, error) {
	prompts := make([][]chat.Message, len(problems))
	for i, p := range problems {
		prompts[i] = []chat.Message{{Role: "user", Content: p.Prompt()}}
	}
	answers, err := answer.GreedyAdapter(b, dir, adapter, prompts, maxNew, batch)
	if err != nil {
		return 0, err
	}
	correct := 0
	for i, text := range answers {
		if mult.Correct(text, strconv.Itoa(problems[i].Answer())) {
			correct++
		}
	}
	return correct, nil
}
