package mult

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
)

// jsonLines decodes a JSONL byte stream into generic values, for order-insensitive comparison.
func jsonLines(t *testing.T, b []byte) []any {
	t.Helper()
	var out []any
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func rowsJSONL(t *testing.T, kind Kind, n int, seed int64) (data.Format, []byte) {
	t.Helper()
	f, rows, err := Rows(kind, n, seed)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := data.WriteJSONL(&b, f, rows); err != nil {
		t.Fatal(err)
	}
	return f, b.Bytes()
}

// The course's make_pairs / make_dataset, run by CPython (testdata/gen_golden.py).
func TestRows_MatchCourse(t *testing.T) {
	for _, tc := range []struct {
		kind   Kind
		n      int
		seed   int64
		golden string
	}{
		{DPO, 512, 0, "course_dpo_seed0.jsonl"},
		{DPO, 40, 7, "course_dpo_seed7.jsonl"},
		{GRPO, 512, 0, "course_grpo_seed0.jsonl"},
		{GRPO, 40, 7, "course_grpo_seed7.jsonl"},
	} {
		want, err := os.ReadFile(filepath.Join("testdata", tc.golden))
		if err != nil {
			t.Fatal(err)
		}
		_, got := rowsJSONL(t, tc.kind, tc.n, tc.seed)
		g, w := jsonLines(t, got), jsonLines(t, want)
		if len(g) != tc.n || len(w) != tc.n {
			t.Fatalf("%s: %d rows, golden %d, want %d", tc.golden, len(g), len(w), tc.n)
		}
		for i := range w {
			if !reflect.DeepEqual(g[i], w[i]) {
				t.Fatalf("%s row %d:\n got %v\nwant %v", tc.golden, i, g[i], w[i])
			}
		}
	}
}

func TestRows_SFTAndKTO(t *testing.T) {
	problems := Problems(30, 3)
	f, rows, err := Rows(SFT, 30, 3)
	if err != nil || f != data.PromptCompletion || len(rows) != 30 {
		t.Fatalf("sft: %v %v %d", f, err, len(rows))
	}
	for i, r := range rows {
		p := problems[i]
		if r.Prompt.Messages[0].Content != p.Prompt() || r.Completion.Messages[0].Content != fmt.Sprint(p.A*p.B) ||
			r.Completion.Messages[0].Role != "assistant" {
			t.Fatalf("sft row %d: %+v", i, r)
		}
	}
	pairs := Pairs(30, 3)
	f, rows, err = Rows(KTO, 30, 3)
	if err != nil || f != data.Unpaired || len(rows) != 60 {
		t.Fatalf("kto: %v %v %d", f, err, len(rows))
	}
	for i, p := range pairs {
		good, bad := rows[2*i], rows[2*i+1]
		if !good.Label || bad.Label || good.Completion.Messages[0].Content != fmt.Sprint(p.Answer()) ||
			bad.Completion.Messages[0].Content != fmt.Sprint(p.Wrong) || bad.Prompt.Messages[0].Content != p.Prompt() {
			t.Fatalf("kto rows %d: %+v %+v", i, good, bad)
		}
		if p.Wrong == p.Answer() || p.A < Lo || p.A > Hi || p.B < Lo || p.B > Hi {
			t.Fatalf("pair %d out of range or not wrong: %+v", i, p)
		}
	}
}

// What Rows writes reads back as the TRL format of its kind.
func TestRows_ReadBack(t *testing.T) {
	for kind, want := range map[Kind]data.Format{SFT: data.PromptCompletion, DPO: data.Preference, KTO: data.Unpaired, GRPO: data.PromptOnly} {
		_, b := rowsJSONL(t, kind, 5, 1)
		d, err := data.Read(bytes.NewReader(b), string(kind), data.FormatAuto)
		if err != nil {
			t.Fatal(err)
		}
		if d.Format != want || !d.Conversational || d.ImplicitPrompt {
			t.Errorf("%s: read back as %v conversational=%v", kind, d.Format, d.Conversational)
		}
	}
}

func TestRows_Errors(t *testing.T) {
	if _, _, err := Rows("ppo", 3, 0); err == nil || !strings.Contains(err.Error(), "sft, dpo, kto, grpo") {
		t.Errorf("bad kind: %v", err)
	}
	if _, _, err := Rows(SFT, 0, 0); err == nil {
		t.Error("n=0: want an error")
	}
}

func TestVerifiers(t *testing.T) {
	for _, tc := range []struct {
		completion            string
		correct, strict, last bool
	}{
		{"12", true, true, true},
		{" 12\n", true, true, true},
		{"답은 12입니다.", true, false, true},
		{"12 or 13", true, false, false},
		{"x12y", true, false, true},
		{"12.", true, false, true},
		{"-12", false, false, false},
		{"012", false, false, false},
		{"1 2", false, false, false},
		{"", false, false, false},
		{"3×4=12", false, false, true},
		{"3 × 4 = 12.", false, false, true},
		{"12, not -12", true, false, false},
		{"3 × 4 = 1", false, false, false}, // truncated
		{"١٢", false, false, false},        // Arabic-Indic digits: Python's \d matches them, so the first integer is "١٢"
		{"١٢ 12", false, false, true},      // ... and shadows the later ASCII 12, as in the course
	} {
		if got := Correct(tc.completion, "12"); got != tc.correct {
			t.Errorf("Correct(%q) = %v, want %v", tc.completion, got, tc.correct)
		}
		if got := Strict(tc.completion, "12"); got != tc.strict {
			t.Errorf("Strict(%q) = %v, want %v", tc.completion, got, tc.strict)
		}
		if got := Last(tc.completion, "12"); got != tc.last {
			t.Errorf("Last(%q) = %v, want %v", tc.completion, got, tc.last)
		}
	}
}

func TestRewards_Registry(t *testing.T) {
	correct, err := data.LookupReward("mult_correct")
	if err != nil {
		t.Fatal(err)
	}
	strict, err := data.LookupReward("mult_strict")
	if err != nil {
		t.Fatal(err)
	}
	completions := []string{"12", "답: 30", "7", "42"}
	cols := map[string][]any{"answer": {"12", 30.0, nil, "42"}}
	got, err := correct(nil, completions, cols)
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 1 || got[1] != 1 || !math.IsNaN(got[2]) || got[3] != 1 {
		t.Errorf("mult_correct = %v, want [1 1 NaN 1]", got)
	}
	got, _ = strict(nil, completions, cols)
	if got[0] != 1 || got[1] != 0 || !math.IsNaN(got[2]) || got[3] != 1 {
		t.Errorf("mult_strict = %v, want [1 0 NaN 1]", got)
	}
	last, err := data.LookupReward("mult_last")
	if err != nil {
		t.Fatal(err)
	}
	got, _ = last(nil, []string{"3 × 4 = 12", "30 or 31", "7", "42."}, cols)
	if got[0] != 1 || got[1] != 0 || !math.IsNaN(got[2]) || got[3] != 1 {
		t.Errorf("mult_last = %v, want [1 0 NaN 1]", got)
	}
	// No answer column: a·b is read from the prompt; a prompt without a×b is not applicable.
	prompts := []string{Problem{3, 4}.Prompt(), "<|im_start|>user\n13×17는 얼마인가요?", "hello"}
	got, err = correct(prompts, []string{"12", "220", "1"}, nil)
	if err != nil || got[0] != 1 || got[1] != 0 || !math.IsNaN(got[2]) {
		t.Errorf("from prompts: %v, %v", got, err)
	}
	if _, err := correct(nil, []string{"1"}, map[string][]any{"answer": {true}}); err == nil {
		t.Error("boolean answer: want an error")
	}
	if _, err := correct(nil, []string{"1", "2"}, map[string][]any{"answer": {"1"}}); err == nil {
		t.Error("length mismatch: want an error")
	}
	if _, err := correct(nil, []string{"1"}, map[string][]any{"answer": {2.5}}); err == nil {
		t.Error("fractional answer: want an error")
	}
}

// mult_correct is the course's verifier: its rewards on tricky completions, as the extra's own
// verifier function gave them under CPython (testdata/gen_golden.py).
func TestRewardCorrect_MatchesCourseVerifier(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "verifier_golden.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var completions []string
	var answers []any
	var want []float64
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var c struct {
			Completion, Answer string
			Reward             float64
		}
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		completions, answers, want = append(completions, c.Completion), append(answers, c.Answer), append(want, c.Reward)
	}
	if len(want) < 20 || !slices.Contains(want, 0) || !slices.Contains(want, 1) {
		t.Fatalf("verifier_golden.jsonl: %d cases %v, want ≥ 20 with both rewards", len(want), want)
	}
	got, err := RewardCorrect(nil, completions, map[string][]any{"answer": answers})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mult_correct(%q, answer %q) = %v, the course's verifier gives %v", completions[i], answers[i], got[i], want[i])
		}
	}
}
