package extreward

import (
	"encoding/json"
	"os"
	"testing"
)

// TRL 0.24.0's own think_format_reward and get_soft_overlong_punishment (as trl/scripts/grpo.py
// registers them) on a table of cases (scripts/reference/trl_rewards.py): the Go ones give the
// same rewards, on conversational and standard completions.
func TestTRLRewards_Golden(t *testing.T) {
	b, err := os.ReadFile("testdata/trl_rewards.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Think []struct {
			Completion string
			Reward     float64
		} `json:"think_format_reward"`
		Overlong []struct {
			Length int
			Reward float64
		} `json:"get_soft_overlong_punishment"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Think) == 0 || len(g.Overlong) == 0 {
		t.Fatal("empty golden")
	}
	think := TRLReward("think_format_reward")
	for _, conversational := range []bool{true, false} {
		var c Call
		for _, tc := range g.Think {
			var comp any = tc.Completion
			if conversational {
				_, comp = ConversationalCompletion(nil, tc.Completion)
			}
			c.Prompts, c.Completions, c.CompletionIDs = append(c.Prompts, ""), append(c.Completions, comp), append(c.CompletionIDs, nil)
		}
		got, err := think.Score(c)
		if err != nil {
			t.Fatal(err)
		}
		for i, tc := range g.Think {
			if got[i] != tc.Reward {
				t.Errorf("think_format_reward(%q) = %g, TRL %g", tc.Completion, got[i], tc.Reward)
			}
		}
	}
	var c Call
	for _, tc := range g.Overlong {
		c.Prompts, c.Completions, c.CompletionIDs = append(c.Prompts, ""), append(c.Completions, ""), append(c.CompletionIDs, make([]int32, tc.Length))
	}
	got, err := TRLReward("get_soft_overlong_punishment").Score(c)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range g.Overlong {
		if got[i] != tc.Reward {
			t.Errorf("get_soft_overlong_punishment(%d tokens) = %g, TRL %g", tc.Length, got[i], tc.Reward)
		}
	}
	if TRLReward("accuracy") != nil {
		t.Error("an unknown name is a TRL reward")
	}
}

// regex:PATTERN and len:N on standard and conversational completions.
func TestPatternReward(t *testing.T) {
	texts := []string{"The answer is 42.", "<think>x</think>42", "", "héllo wörld, twenty chars"}
	for _, conversational := range []bool{false, true} {
		var c Call
		for _, s := range texts {
			var comp any = s
			if conversational {
				_, comp = ConversationalCompletion(nil, s)
			}
			c.Prompts, c.Completions, c.CompletionIDs = append(c.Prompts, ""), append(c.Completions, comp), append(c.CompletionIDs, nil)
		}
		for spec, want := range map[string][]float64{
			`regex:\b42\b`:             {1, 1, 0, 0},
			`regex:^<think>.*</think>`: {0, 1, 0, 0},
			"len:20":                   {-3, -2, -20, -5},
		} {
			f, err := PatternReward(spec, "r")
			if err != nil {
				t.Fatal(err)
			}
			got, err := f.Score(c)
			if err != nil || !equal(got, want) {
				t.Errorf("%s (conversational %v) = %v, %v; want %v", spec, conversational, got, err, want)
			}
		}
	}
	for _, bad := range []string{"regex:(", "len:x", "len:-1"} {
		if _, err := PatternReward(bad, "r"); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if f, err := PatternReward("mult_correct", "r"); f != nil || err != nil {
		t.Errorf("a name that is no pattern: %v %v", f, err)
	}
}
