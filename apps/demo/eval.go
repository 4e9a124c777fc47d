package demo

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/apps/answer"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
)

// Accuracy is greedy exact-match accuracy on a problem set, with its binomial standard error
// √(p(1−p)/n): the sampling noise of measuring p on n problems.
type Accuracy struct {
	Correct, N int
}

// P is the fraction correct.
func (a Accuracy) P() float64 { return float64(a.Correct) / float64(max(a.N, 1)) }

// StdErr is the binomial standard error of P.
func (a Accuracy) StdErr() float64 {
	p := a.P()
	return math.Sqrt(p * (1 - p) / float64(max(a.N, 1)))
}

func (a Accuracy) String() string {
	return fmt.Sprintf("%5.1f%% ± %.1f (%d/%d)", 100*a.P(), 100*a.StdErr(), a.Correct, a.N)
}

// Scores are a checkpoint's greedy accuracies on a problem set under the three verifiers:
// Strict (mult.Strict: the answer is exactly a·b), Correct (mult.Correct, the course's: the first
// integer of the answer is a·b, whatever the format) and Last (mult.Last: its last integer is).
type Scores struct {
	Strict, Correct, Last Accuracy
}

// verifiers are the demo's verifier rewards, each with its check and its field of Scores: the one
// list Run validates --reward against, Evaluate scores with and Of reads.
var verifiers = []struct {
	reward string
	check  func(completion, gold string) bool
	of     func(*Scores) *Accuracy
}{
	{"mult_strict", mult.Strict, func(s *Scores) *Accuracy { return &s.Strict }},
	{"mult_correct", mult.Correct, func(s *Scores) *Accuracy { return &s.Correct }},
	{"mult_last", mult.Last, func(s *Scores) *Accuracy { return &s.Last }},
}

// checkVerifier reports whether reward names one of the verifiers.
func checkVerifier(reward string) error {
	var names []string
	for _, v := range verifiers {
		if v.reward == reward {
			return nil
		}
		names = append(names, v.reward)
	}
	return fmt.Errorf("demo: the reward must be one of %s, got %q", strings.Join(names, ", "), reward)
}

// Of is the accuracy under the verifier reward (a name checkVerifier accepts).
func (s Scores) Of(reward string) Accuracy {
	for _, v := range verifiers {
		if v.reward == reward {
			return *v.of(&s)
		}
	}
	panic("demo: no verifier " + reward)
}

// Evaluate answers every problem greedily with the checkpoint in dir (its chat template, every
// EOS id, at most maxNew new tokens; apps/answer), the conversations made by q, and scores the
// answers with every verifier.
func Evaluate(b backends.Backend, dir string, ps []mult.Problem, q Prompter, maxNew int) (Scores, error) {
	prompts := make([][]chat.Message, len(ps))
	for i, p := range ps {
		prompts[i] = q.Messages(p)
	}
	answers, err := answer.Greedy(b, dir, prompts, maxNew, 0)
	if err != nil {
		return Scores{}, err
	}
	var s Scores
	for _, v := range verifiers {
		acc := v.of(&s)
		acc.N = len(ps)
		for i, text := range answers {
			if v.check(text, strconv.Itoa(ps[i].Answer())) {
				acc.Correct++
			}
		}
	}
	return s, nil
}
