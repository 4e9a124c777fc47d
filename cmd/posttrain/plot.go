package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/apps/curves"
)

func init() {
	addCommand(&cli.Command{
		Name:  "plot",
		Usage: "draw the training curves of runs (RUN_DIR/metrics.jsonl), one panel per metric against step, several runs overlaid",
		Description: "Panels come in the order the method's users read them (GRPO: reward, rewards/*, reward_std, kl, loss, ...;\n" +
			"SFT: loss, mean_token_accuracy, learning_rate, grad_norm; DPO/KTO: loss, rewards/margins, ...), then the\n" +
			"rest by name; the method is the one in the first RUN_DIR/training_args.yaml, or guessed from the\n" +
			"metric names. A metric logged more than once that never changes (in every run) is listed in one line\n" +
			"of text under the panels instead of drawn. eval_X is drawn dashed on X's panel. With several runs, each run has its own colour and the\n" +
			"legend at the top names it; a metric missing in a run is drawn for the others.",
		ArgsUsage: "RUN_DIR [RUN_DIR...]",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "image file: .png, .svg or .pdf (default with one run: RUN_DIR/curves.png; required with several)"},
			&cli.StringSliceFlag{Name: "metrics", Usage: "metrics to draw, comma-separated, in this order and each in a panel even if constant (default: all in the files)"},
			&cli.StringSliceFlag{Name: "labels", Usage: "legend names of the runs, comma-separated, one per RUN_DIR (default: each directory's base name)"},
			&cli.Float64Flag{Name: "smooth", Usage: "EMA weight in [0, 1) as TensorBoard's smoothing slider (with its debiasing): the smoothed curve is drawn over the faded raw one; 0 is off"},
			&cli.IntFlag{Name: "cols", Value: 3, Usage: "panels per row"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			args := cmd.Args().Slice()
			if len(args) == 0 {
				return usageError{fmt.Errorf("plot: want one RUN_DIR (or metrics.jsonl) or more, got none")}
			}
			out := cmd.String("output")
			if out == "" {
				if len(args) > 1 {
					return usageError{fmt.Errorf("plot: %d runs: name the output file with -o (a comparison belongs to none of the runs' directories)", len(args))}
				}
				out = filepath.Join(curves.RunDir(args[0]), "curves.png")
			}
			opts := curves.Options{Metrics: cmd.StringSlice("metrics"), Labels: cmd.StringSlice("labels"),
				Smooth: cmd.Float64("smooth"), Cols: int(cmd.Int("cols"))}
			if err := curves.Draw(args, out, opts); err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			fmt.Fprintf(cmd.Root().Writer, "wrote %s\n", out)
			return nil
		},
	})
}
