package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// The extras' progress lines, in the extras' format (f'step {step:6d}  최근 10 에피소드 평균 return
// {mean:6.1f}', f'iter {it:3d}  …'), agree with --json's curve; every flag is in "args".
func TestToyGymExtras_LinesAndJSON(t *testing.T) {
	for _, tc := range []struct {
		name, lineFmt string
		args          []string
		flags         []string
	}{
		{"cartpole-dqn", "step %6d  최근 10 에피소드 평균 return %6.1f",
			[]string{"--total-steps", "1300", "--print-every", "400", "--seed", "3"},
			[]string{"env", "seed", "total_steps", "learning_rate", "buffer_size", "gamma", "batch_size", "start_e", "end_e",
				"exploration_fraction", "learning_starts", "train_frequency", "target_network_frequency", "hidden", "print_every"}},
		{"cartpole-ppo", "iter %3d  최근 10 에피소드 평균 return %6.1f",
			[]string{"--env", "Acrobot-v1", "--iterations", "3", "--num-steps", "200", "--minibatch-size", "100", "--print-every", "1"},
			[]string{"env", "seed", "iterations", "learning_rate", "num_steps", "gamma", "gae_lambda", "clip_coef", "update_epochs",
				"minibatch_size", "norm_adv", "vf_coef", "ent_coef", "max_grad_norm", "hidden", "print_every"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines, err := runApp(t, append([]string{"toy", tc.name}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			out, err := runApp(t, append([]string{"toy", tc.name, "--json"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				Extra    string
				Args     map[string]any
				Episodes []struct{ At int }
				Progress []struct {
					At         int
					MeanReturn float64 `json:"mean_return_last10"`
				}
				Final *float64 `json:"final_mean_return_last10"`
			}
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%v in %q", err, out)
			}
			if got.Extra != tc.name || got.Final == nil || len(got.Episodes) == 0 || len(got.Progress) == 0 {
				t.Fatalf("json %q", out)
			}
			var want []string
			for _, p := range got.Progress {
				want = append(want, fmt.Sprintf(tc.lineFmt, p.At, p.MeanReturn))
			}
			if lines != strings.Join(want, "\n")+"\n" {
				t.Errorf("printed\n%s\nwant (from --json)\n%s", lines, strings.Join(want, "\n"))
			}
			for _, f := range tc.flags {
				if _, ok := got.Args[f]; !ok {
					t.Errorf("args lacks %s: %v", f, got.Args)
				}
			}
			if len(got.Args) != len(tc.flags) {
				t.Errorf("args has %d keys, want %d: %v", len(got.Args), len(tc.flags), got.Args)
			}
		})
	}
}

// Bad settings are usage errors naming the flag.
func TestToyGymExtras_BadFlags(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"cartpole-dqn --env MountainCar-v0", `--env: unknown environment "MountainCar-v0"`},
		{"cartpole-dqn --batch-size 0", "--batch-size 0 must be >= 1"},
		{"cartpole-dqn --hidden 120,x", `--hidden wants comma-separated integers like 120,84; "x" is not one`},
		{"cartpole-dqn --seed -2", "--seed -2: Gymnasium's seed must be >= 0"},
		{"cartpole-ppo --minibatch-size 2000", "--minibatch-size 2000 must be in [2, num-steps 1024]"},
		{"cartpole-ppo --gae-lambda 1.5", "--gae-lambda 1.5 must be in [0, 1]"},
	} {
		_, err := runApp(t, append([]string{"toy"}, strings.Fields(tc.args)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("toy %s: err %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}
