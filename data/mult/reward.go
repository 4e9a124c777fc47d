package mult

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/posttrain/posttrain/data"
)

func init() {
	data.RegisterReward("mult_correct", RewardCorrect)
	data.RegisterReward("mult_strict", RewardStrict)
	data.RegisterReward("mult_last", RewardLast)
}

// firstInt is the course verifier's re.search(r'-?\d+', text); Python's \d on str matches any
// Unicode decimal digit (category Nd), hence \p{Nd}.
var firstInt = regexp.MustCompile(`-?\p{Nd}+`)

// promptProblem finds a×b in a prompt, for datasets without an "answer" column.
var promptProblem = regexp.MustCompile(`(\d+)\s*×\s*(\d+)`)

// Correct is the course's verifier on one completion: the first integer of the text, as a
// string, equals gold (so "12", "답: 12입니다" and "12 or 13" pass; "012" and "-12" do not).
func Correct(completion, gold string) bool {
	m := firstInt.FindString(completion)
	return m != "" && m == gold
}

// Strict is the strict-format variant: the completion, with surrounding whitespace removed, is
// exactly the integer gold and nothing else.
func Strict(completion, gold string) bool {
	return gold != "" && strings.TrimSpace(completion) == gold
}

// Last is the final-answer verifier: the last integer of the text, as a string, equals gold (so
// "12", "3 × 4 = 12" and "3×4 is 12." pass; "12 or 13" and "12, not -12" do not), the answer
// extraction of math-word-problem rewards, for a model that states the problem before its answer.
func Last(completion, gold string) bool {
	m := firstInt.FindAllString(completion, -1)
	return len(m) > 0 && m[len(m)-1] == gold
}

// RewardCorrect is the reward function mult_correct: 1 if Correct, else 0 (the course's verifier,
// logged as rewards/mult_correct/mean).
func RewardCorrect(prompts, completions []string, columns map[string][]any) ([]float64, error) {
	return score(prompts, completions, columns, Correct)
}

// RewardStrict is the reward function mult_strict: 1 if Strict, else 0.
func RewardStrict(prompts, completions []string, columns map[string][]any) ([]float64, error) {
	return score(prompts, completions, columns, Strict)
}

// RewardLast is the reward function mult_last: 1 if Last, else 0.
func RewardLast(prompts, completions []string, columns map[string][]any) ([]float64, error) {
	return score(prompts, completions, columns, Last)
}

// score applies check to every completion against its gold answer: the "answer" column when the
// dataset has one (a string as in the course, or an integral number), else a·b read from the
// prompt. A sample with no gold (answer null, or no a×b in the prompt) scores NaN: not
// applicable, TRL's None. A gold of another type, or mismatched lengths, is an error.
func score(prompts, completions []string, columns map[string][]any, check func(c, gold string) bool) ([]float64, error) {
	answers, hasAnswer := columns["answer"]
	if hasAnswer && len(answers) != len(completions) {
		return nil, fmt.Errorf("answer column has %d values for %d completions", len(answers), len(completions))
	}
	if !hasAnswer && len(prompts) != len(completions) {
		return nil, fmt.Errorf("%d prompts for %d completions", len(prompts), len(completions))
	}
	out := make([]float64, len(completions))
	for i, c := range completions {
		var gold string
		var ok bool
		var err error
		if hasAnswer {
			gold, ok, err = goldString(answers[i])
			if err != nil {
				return nil, fmt.Errorf("answer %d: %w", i, err)
			}
		} else {
			gold, ok = goldFromPrompt(prompts[i])
		}
		switch {
		case !ok:
			out[i] = math.NaN()
		case check(c, gold):
			out[i] = 1
		}
	}
	return out, nil
}

func goldString(v any) (string, bool, error) {
	switch t := v.(type) {
	case nil:
		return "", false, nil
	case string:
		return t, true, nil
	case int:
		return strconv.Itoa(t), true, nil
	case int64:
		return strconv.FormatInt(t, 10), true, nil
	case json.Number:
		return t.String(), true, nil
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
			return strconv.FormatInt(int64(t), 10), true, nil
		}
		return "", false, fmt.Errorf("not an integer: %v", t)
	}
	return "", false, fmt.Errorf("want a string or an integer, got %T", v)
}

func goldFromPrompt(p string) (string, bool) {
	m := promptProblem.FindStringSubmatch(p)
	if m == nil {
		return "", false
	}
	a, errA := strconv.Atoi(m[1])
	b, errB := strconv.Atoi(m[2])
	if errA != nil || errB != nil {
		return "", false
	}
	return strconv.Itoa(a * b), true
}
