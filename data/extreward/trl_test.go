package extreward

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/posttrain/posttrain/data/chat"
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

// TRL 0.24.0's trl.rewards.accuracy_reward (math_verify 0.8.0) is not built in (docs/grpo.md):
// through the Python worker, with the pinned trl-0.24 reference venv's Python, it gives the
// rewards TRL itself gave on the golden's table (scripts/reference/accuracy_reward.py), None
// (an unverifiable pair) as NaN, so the worker hands it TRL's arguments: conversational
// completions and the solution column.
func TestAccuracyReward_WorkerAsTRL(t *testing.T) {
	b, err := os.ReadFile("testdata/accuracy_reward.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Cases []struct {
			Solution, Completion string
			Reward               *float64
		}
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 50 {
		t.Fatalf("%d cases", len(g.Cases))
	}
	py := filepath.Join("..", "..", ".venv-reference", "trl-0.24", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no %s (make reference-env)", py)
	}
	w, funcs, err := Start(py, []string{"trl.rewards.accuracy_reward"}, os.Stderr, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := Call{Columns: map[string][]any{}}
	for _, k := range g.Cases {
		p, comp := ConversationalCompletion([]chat.Message{{Role: "user", Content: "Solve it."}}, k.Completion)
		c.Prompts, c.Completions = append(c.Prompts, p), append(c.Completions, comp)
		c.CompletionIDs = append(c.CompletionIDs, []int32{1})
		c.Columns["solution"] = append(c.Columns["solution"], k.Solution)
	}
	got, err := funcs[0].Score(c)
	if err != nil {
		t.Fatal(err)
	}
	if funcs[0].Name != "accuracy_reward" {
		t.Errorf("logged as %q", funcs[0].Name)
	}
	for i, k := range g.Cases {
		if want := k.Reward; want == nil && !math.IsNaN(got[i]) || want != nil && got[i] != *want {
			t.Errorf("solution %q, completion %q: %v, TRL %v", k.Solution, k.Completion, got[i], k.Reward)
		}
	}
}
