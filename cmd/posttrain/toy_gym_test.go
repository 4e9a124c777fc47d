package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `posttrain toy env --json` prints the golden Gymnasium trajectories of toy/gym/testdata (the
// first episode of the sampled-action cases seeded like --seed: reset(seed=S),
// action_space.seed(S)).
func TestToyEnv_JSONMatchesGymnasiumReference(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "toy", "gym", "testdata", "trajectories.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Name, Env  string
			Seed       uint64
			ActionSeed *uint64 `json:"action_seed"`
			Policy     string
			Episodes   []struct {
				Reset struct{ Observation []float64 }
				Steps []struct {
					Action                int
					Observation           []float64
					Reward                float64
					Terminated, Truncated bool
				}
			}
		}
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, c := range g.Cases {
		if c.Policy != "random" || c.ActionSeed == nil || *c.ActionSeed != c.Seed {
			continue
		}
		checked++
		out, err := runApp(t, "toy", "env", "--env", c.Env, "--seed", jsonNum(c.Seed), "--json")
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Env         string
			Observation []float32
			Steps       []struct {
				Action                int
				Observation           []float32
				Reward                float64
				Terminated, Truncated bool
			}
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s: %v in %q", c.Name, err, out)
		}
		want := c.Episodes[0]
		if len(got.Steps) != len(want.Steps) || !sameObs(got.Observation, want.Reset.Observation) {
			t.Fatalf("%s: %d steps, reset %v; want %d, %v", c.Name, len(got.Steps), got.Observation, len(want.Steps), want.Reset.Observation)
		}
		for i, s := range want.Steps {
			gs := got.Steps[i]
			if gs.Action != s.Action || !sameObs(gs.Observation, s.Observation) || gs.Reward != s.Reward ||
				gs.Terminated != s.Terminated || gs.Truncated != s.Truncated {
				t.Fatalf("%s step %d: got %+v, want %+v", c.Name, i, gs, s)
			}
		}
	}
	if checked < 2 {
		t.Fatalf("only %d golden cases checked", checked)
	}
}

func sameObs(got []float32, want []float64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != float32(want[i]) {
			return false
		}
	}
	return true
}

func jsonNum(x uint64) string { b, _ := json.Marshal(x); return string(b) }

// Bad input is a usage error naming the flag.
func TestToyEnv_BadInput(t *testing.T) {
	for _, tc := range []struct{ args, want string }{
		{"--env Pong-v5", `unknown environment "Pong-v5"`},
		{"--seed -1", "--seed -1: Gymnasium's seed must be >= 0"},
		{"--actions 0,x", `--actions wants comma-separated integers like 0,1,1; "x" is not one`},
		{"--actions 0,2", "action 2 (#2) is not one of CartPole-v1's actions 0..1"},
		{"--actions 0,1", "the 2 actions ran out before the episode ended"},
	} {
		_, err := runApp(t, append([]string{"toy", "env"}, strings.Fields(tc.args)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("toy env %s: err %v, want it to contain %q", tc.args, err, tc.want)
		}
	}
}
