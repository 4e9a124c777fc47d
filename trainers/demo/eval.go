package demo

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/trainers/eval"
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

// Scores are a checkpoint's greedy accuracies on a problem set under the three verifiers: Strict
// (mult.Strict: the answer is exactly a·b), Correct (mult.Correct, the course's: the first
// integer of the answer is a·b, whatever the format) and Last (mult.Last: its last integer is).
type Scores struct {
	Strict, Correct, Last Accuracy
}

// Of is the accuracy under the verifier a reward function stands for: Strict for mult_strict,
// Last for mult_last, else Correct.
func (s Scores) Of(reward string) Accuracy {
	switch reward {
	case "mult_strict":
		return s.Strict
	case "mult_last":
		return s.Last
	}
	return s.Correct
}

// Evaluate answers every problem greedily with the checkpoint in dir (its chat template, every
// EOS id, at most maxNew new tokens; trainers/eval), the conversations made by q, and scores the
// answers with the three verifiers.
func Evaluate(b backends.Backend, dir string, ps []mult.Problem, q Prompter, maxNew int) (Scores, error) {
	prompts := make([][]chat.Message, len(ps))
	for i, p := range ps {
		prompts[i] = q.Messages(p)
	}
	answers, err := eval.Greedy(b, dir, prompts, maxNew, 0)
	if err != nil {
		return Scores{}, err
	}
	s := Scores{Strict: Accuracy{N: len(ps)}, Correct: Accuracy{N: len(ps)}, Last: Accuracy{N: len(ps)}}
	for i, text := range answers {
		gold := strconv.Itoa(ps[i].Answer())
		if mult.Strict(text, gold) {
			s.Strict.Correct++
		}
		if mult.Correct(text, gold) {
			s.Correct.Correct++
		}
		if mult.Last(text, gold) {
			s.Last.Correct++
		}
	}
	return s, nil
}
