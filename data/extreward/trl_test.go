package extreward

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
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

// accuracyCases reads the golden of TRL 0.24.0's trl.rewards.accuracy_reward (math_verify 0.8.0)
// on a table of solution/completion pairs (scripts/reference/accuracy_reward.py).
func accuracyCases(t *testing.T) []accuracyCase {
	b, err := os.ReadFile("testdata/accuracy_reward.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Cases []accuracyCase }
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 200 {
		t.Fatalf("%d cases", len(g.Cases))
	}
	return g.Cases
}

// accuracyCall is the reward call TRL's GRPOTrainer makes for the cases: conversational
// completions and the solution column.
func accuracyCall(cases []accuracyCase) Call {
	c := Call{Columns: map[string][]any{}}
	for _, k := range cases {
		p, comp := ConversationalCompletion([]chat.Message{{Role: "user", Content: "Solve it."}}, k.Completion)
		c.Prompts, c.Completions = append(c.Prompts, p), append(c.Completions, comp)
		c.CompletionIDs = append(c.CompletionIDs, []int32{1})
		c.Columns["solution"] = append(c.Columns["solution"], k.Solution)
	}
	return c
}

type accuracyCase struct {
	Solution, Completion string
	Reward               *float64
}

// accuracyUndecided are the table's pairs the Go accuracy_reward leaves unscored, each for a
// reason of its kind: symbols, intervals, ± and equations of different symbols (sympy's
// algebra), a sum of floats one unit in the last place from the other side (sympy's
// cancellation), and texts latex2sympy reads its own way (juxtaposed factors, a mixed number
// 2\frac{1}{2}, \text around a number, \frac34).
var accuracyUndecided = map[[2]string]bool{
	{`\frac{3}{4}`, `\boxed{\frac34}`}:    true,
	{`72`, `\boxed{\text{72}}`}:           true,
	{`1234`, `\boxed{1\,234}`}:            true,
	{`1234`, `\boxed{1 234}`}:             true,
	{`12`, `\boxed{(3)(4)}`}:              true,
	{`12`, `\boxed{3(4)}`}:                true,
	{`$-2, 2$`, `\boxed{\pm 2}`}:          true,
	{`$x = 5$`, `\boxed{y=5}`}:            true,
	{`$2x + 1$`, `\boxed{2x+1}`}:          true,
	{`$2x + 1$`, `\boxed{1+2x}`}:          true,
	{`$(1, 2)$`, `\boxed{(1,2)}`}:         true,
	{`$[1, 2]$`, `\boxed{[1,2]}`}:         true,
	{`$2\frac{1}{2}$`, `\boxed{2.5}`}:     true,
	{`$\frac{3}{10}$`, `\boxed{0.1+0.2}`}: true,
	{`$\text{(A)}$`, `\boxed{A}`}:         true,
}

// The Go accuracy_reward gives TRL's own reward on every pair of the table it decides, and leaves
// unscored (NaN, TRL's None) exactly the pairs accuracyUndecided lists; through Score it reads
// conversational completions and the solution column, and a dataset without one is an error.
func TestAccuracyReward_AsTRL(t *testing.T) {
	cases := accuracyCases(t)
	decided := 0
	c := accuracyCall(cases)
	f := TRLReward("accuracy_reward")
	got, err := f.Score(c)
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range cases {
		if k.Reward == nil {
			t.Fatalf("TRL left %q | %q unscored; the table holds decided pairs", k.Solution, k.Completion)
		}
		switch undecided := accuracyUndecided[[2]string{k.Solution, k.Completion}]; {
		case undecided && !math.IsNaN(got[i]):
			t.Errorf("solution %q, completion %q: %v, listed as undecided (TRL %v)", k.Solution, k.Completion, got[i], *k.Reward)
		case !undecided && got[i] != *k.Reward:
			t.Errorf("solution %q, completion %q: %v, TRL %v", k.Solution, k.Completion, got[i], *k.Reward)
		case !undecided:
			decided++
		}
	}
	if decided+len(accuracyUndecided) != len(cases) {
		t.Errorf("%d decided and %d listed undecided of %d cases: a listed pair is missing from the table", decided, len(accuracyUndecided), len(cases))
	}
	t.Logf("%d of %d pairs decided as TRL decides them, %d unscored", decided, len(cases), len(cases)-decided)
	if !f.Undecidable {
		t.Error("accuracy_reward's unscored samples are not counted")
	}
	if _, err := f.Score(Call{Prompts: []any{"q"}, Completions: []any{"a"}, CompletionIDs: [][]int32{nil}}); err == nil || !strings.Contains(err.Error(), "solution") {
		t.Errorf("no solution column: %v", err)
	}
}

// TRL's own accuracy_reward through the Python worker, with the pinned trl-0.24 reference venv's
// Python, gives the rewards TRL itself gave on the golden's table, None (an unverifiable pair) as
// NaN, so the worker hands it TRL's arguments: conversational completions and the solution
// column.
func TestAccuracyReward_WorkerAsTRL(t *testing.T) {
	cases := accuracyCases(t)
	py := filepath.Join("..", "..", ".venv-reference", "trl-0.24", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no %s (make reference-env)", py)
	}
	w, funcs, err := Start(py, []string{"trl.rewards.accuracy_reward"}, os.Stderr, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c := accuracyCall(cases)
	got, err := funcs[0].Score(c)
	if err != nil {
		t.Fatal(err)
	}
	if funcs[0].Name != "accuracy_reward" {
		t.Errorf("logged as %q", funcs[0].Name)
	}
	for i, k := range cases {
		if want := k.Reward; want == nil && !math.IsNaN(got[i]) || want != nil && got[i] != *want {
			t.Errorf("solution %q, completion %q: %v, TRL %v", k.Solution, k.Completion, got[i], k.Reward)
		}
	}
}
