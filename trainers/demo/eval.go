package demo

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/grpo"
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

// Evaluate answers every problem greedily with the checkpoint in dir (its chat template, every
// EOS id, at most 6 new tokens) and scores the answers with the course's verifier (mult.Correct:
// the first integer of the answer is a·b).
func Evaluate(b backends.Backend, dir string, ps []mult.Problem) (Accuracy, error) {
	ctx, cfg, err := qwen2.Load(dir, dtypes.Float32)
	if err != nil {
		return Accuracy{}, err
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return Accuracy{}, err
	}
	tpl, err := chat.Load(dir)
	if err != nil {
		return Accuracy{}, err
	}
	stop, err := grpo.StopIDs(dir, cfg, tok)
	if err != nil {
		return Accuracy{}, err
	}
	prompts, err := grpo.PromptsFromRows(PromptRows(ps), tpl, tok)
	if err != nil {
		return Accuracy{}, err
	}
	ids := make([][]int32, len(prompts))
	for i, p := range prompts {
		ids[i] = p.IDs
	}
	gen := qwen2.NewGenerator(b, ctx, cfg)
	defer gen.Finalize()
	gens, err := gen.Generate(ids, qwen2.GenerateOptions{MaxNewTokens: 6, StopIDs: stop, Tokenizer: tok})
	if err != nil {
		return Accuracy{}, err
	}
	acc := Accuracy{N: len(ps)}
	for i, g := range gens {
		if mult.Correct(g.Text, strconv.Itoa(ps[i].Answer())) {
			acc.Correct++
		}
	}
	return acc, nil
}
