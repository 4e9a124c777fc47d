// Package mult is the course's multiplication task (extras trl_dpo.py / trl_grpo.py): the
// prompt "{a}×{b}는 얼마인가요? 숫자 하나로만 답하세요." with a, b drawn by CPython's
// random.Random(seed).randint(2, 19), the DPO pairs with a plausible wrong answer, and the
// verifier rewards registered as mult_correct and mult_strict.
package mult

import (
	"fmt"
	"strconv"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/internal/pyrand"
)

// Lo and Hi bound the factors: rng.randint(2, 19).
const Lo, Hi = 2, 19

// Problem is one multiplication question a×b.
type Problem struct{ A, B int }

// Prompt is the course's user message.
func (p Problem) Prompt() string {
	return fmt.Sprintf("%d×%d는 얼마인가요? 숫자 하나로만 답하세요.", p.A, p.B)
}

// Answer is a·b.
func (p Problem) Answer() int { return p.A * p.B }

// WrongOffsets are make_pairs' offsets of a plausible wrong answer from a·b, in its order:
// [-a, -b, b, a, 1, -1].
func (p Problem) WrongOffsets() [6]int { return [...]int{-p.A, -p.B, p.B, p.A, 1, -1} }

// Pair is a problem with the DPO rejected answer.
type Pair struct {
	Problem
	Wrong int
}

// Problems draws n problems as the course's make_dataset(n, seed) does: per row
// a, b = rng.randint(2, 19), rng.randint(2, 19).
func Problems(n int, seed int64) []Problem {
	rng := pyrand.New(seed)
	out := make([]Problem, n)
	for i := range out {
		a := rng.RandInt(Lo, Hi)
		out[i] = Problem{a, rng.RandInt(Lo, Hi)}
	}
	return out
}

// Pairs draws n pairs as the course's make_pairs(n, seed) does: a, b as in Problems, then
// wrong = a·b + rng.choice([-a, -b, b, a, 1, -1]).
func Pairs(n int, seed int64) []Pair {
	rng := pyrand.New(seed)
	out := make([]Pair, n)
	for i := range out {
		a := rng.RandInt(Lo, Hi)
		b := rng.RandInt(Lo, Hi)
		p := Problem{a, b}
		offsets := p.WrongOffsets()
		out[i] = Pair{p, a*b + offsets[rng.Choice(len(offsets))]}
	}
	return out
}

// Kind names the trainer a dataset is made for.
type Kind string

// The kinds of dataset Rows makes.
const (
	SFT  Kind = "sft"  // prompt-completion: the correct answer (make_dataset draws)
	DPO  Kind = "dpo"  // preference: chosen = a·b, rejected = wrong (make_pairs, exactly)
	KTO  Kind = "kto"  // unpaired: two rows per make_pairs pair, desirable then undesirable
	GRPO Kind = "grpo" // prompt-only with an "answer" column (make_dataset, exactly)
)

// Kinds lists the valid kinds.
var Kinds = []Kind{SFT, DPO, KTO, GRPO}

// ParseKind checks a kind name.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("unknown kind %q (valid: sft, dpo, kto, grpo)", s)
}

// Rows makes the conversational TRL rows of a kind from n problems drawn with seed. Every kind
// draws like the course: dpo and kto like make_pairs (a, b, then the wrong-answer choice), sft and
// grpo like make_dataset (a, b only), so the same seed gives the same problems as the Python.
// KTO gives 2n rows: for each pair, (prompt, a·b, label true) then (prompt, wrong, label false),
// which is TRL's unpair_preference_dataset of the DPO pairs, interleaved so that every batch holds
// desirable and undesirable rows 1:1 (KTO's recommended ratio).
func Rows(kind Kind, n int, seed int64) (data.Format, []data.Row, error) {
	if n < 1 {
		return 0, nil, fmt.Errorf("mult rows: n must be ≥ 1, got %d", n)
	}
	user := func(p Problem) data.Text {
		return data.Text{Messages: []chat.Message{{Role: "user", Content: p.Prompt()}}}
	}
	assistant := func(v int) data.Text {
		return data.Text{Messages: []chat.Message{{Role: "assistant", Content: strconv.Itoa(v)}}}
	}
	var rows []data.Row
	switch kind {
	case SFT:
		for _, p := range Problems(n, seed) {
			rows = append(rows, data.Row{Prompt: user(p), Completion: assistant(p.Answer())})
		}
		return data.PromptCompletion, rows, nil
	case GRPO:
		for _, p := range Problems(n, seed) {
			rows = append(rows, data.Row{Prompt: user(p), Columns: map[string]any{"answer": strconv.Itoa(p.Answer())}})
		}
		return data.PromptOnly, rows, nil
	case DPO:
		for _, p := range Pairs(n, seed) {
			rows = append(rows, data.Row{Prompt: user(p.Problem), Chosen: assistant(p.Answer()), Rejected: assistant(p.Wrong)})
		}
		return data.Preference, rows, nil
	case KTO:
		for _, p := range Pairs(n, seed) {
			rows = append(rows,
				data.Row{Prompt: user(p.Problem), Completion: assistant(p.Answer()), Label: true},
				data.Row{Prompt: user(p.Problem), Completion: assistant(p.Wrong), Label: false})
		}
		return data.Unpaired, rows, nil
	}
	_, err := ParseKind(string(kind))
	return 0, nil, err
}
