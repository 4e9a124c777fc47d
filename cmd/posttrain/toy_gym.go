package main

// `posttrain toy env`: one episode of Gymnasium's CartPole-v1 or Acrobot-v1 (toy/gym), step by
// step, so that it can be compared with Gymnasium's own env.reset(seed=S) / env.step(a).

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/posttrain/posttrain/toy/gym"
	"github.com/urfave/cli/v3"
)

func init() {
	addToy(toyExperiment{
		Phase: 4, Order: 90,
		Command: &cli.Command{
			Name:  "env",
			Usage: "one episode of Gymnasium's CartPole-v1 or Acrobot-v1 (the extras' environments), step by step",
			Flags: []cli.Flag{
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object (env, seed, reset observation, steps)"},
				&cli.StringFlag{Name: "env", Value: "CartPole-v1", Usage: "environment: " + strings.Join(gym.IDs, " or ")},
				&cli.Int64Flag{Name: "seed", Value: 0, Usage: "env.reset(seed=S) (and action_space.seed(S) when actions are sampled)"},
				&cli.StringFlag{Name: "actions", Usage: "comma-separated actions, e.g. 0,1,1 (empty: action_space.sample() until the episode ends)"},
			},
			Action:       envAction,
			OnUsageError: toyUsageError,
		},
	})
}

func envAction(ctx context.Context, cmd *cli.Command) error {
	if err := noToyArgs(cmd); err != nil {
		return err
	}
	seed := cmd.Int64("seed")
	if seed < 0 {
		return usageError{fmt.Errorf("toy env: --seed %d: Gymnasium's seed must be >= 0", seed)}
	}
	var actions []int
	if s := strings.TrimSpace(cmd.String("actions")); s != "" {
		for _, f := range strings.Split(s, ",") {
			a, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return usageError{fmt.Errorf("toy env: --actions wants comma-separated integers like 0,1,1; %q is not one", strings.TrimSpace(f))}
			}
			actions = append(actions, a)
		}
	}
	tr, err := gym.Rollout(cmd.String("env"), uint64(seed), actions)
	if err != nil {
		return usageError{fmt.Errorf("toy env: --env %s --seed %d: %w", cmd.String("env"), seed, err)}
	}
	w := cmd.Root().Writer
	if cmd.Bool("json") {
		b, err := json.Marshal(tr)
		if err != nil {
			return fmt.Errorf("toy env: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	lines := []string{fmt.Sprintf("reset(seed=%d)  observation %s", seed, fmtObs(tr.Observation))}
	for i, s := range tr.Steps {
		lines = append(lines, fmt.Sprintf("step %3d  action %d  observation %s  reward %g  terminated %t  truncated %t",
			i+1, s.Action, fmtObs(s.Observation), s.Reward, s.Terminated, s.Truncated))
	}
	return writeLines(w, lines)
}

// fmtObs writes float32 values as numpy prints them with repr: shortest round-trip digits.
func fmtObs(obs []float32) string {
	parts := make([]string, len(obs))
	for i, x := range obs {
		parts[i] = strconv.FormatFloat(float64(x), 'g', -1, 32)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
