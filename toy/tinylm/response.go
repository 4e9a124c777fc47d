package tinylm

import (
	"fmt"
	"math"
	"strings"
)

// eosMark is how Show writes <eos>.
const eosMark = "⏎"

// Show writes tokens as the course does: <eos> becomes ⏎ (['1','2','<eos>'] → "12⏎").
func Show(tokens []int) string {
	var b strings.Builder
	for _, t := range tokens {
		if t == EOS {
			b.WriteString(eosMark)
		} else {
			b.WriteString(Vocab[t])
		}
	}
	return b.String()
}

// Parse is the inverse of Show.
func Parse(text string) ([]int, error) {
	var out []int
	for _, r := range text {
		s := string(r)
		if s == eosMark {
			out = append(out, EOS)
			continue
		}
		i := tokenIndex(s)
		if i < 0 || i == EOS {
			return nil, fmt.Errorf("tinylm: parse %q: unknown token %q", text, s)
		}
		out = append(out, i)
	}
	return out, nil
}

// MustParse is Parse for the course's literal responses; it panics on a bad literal.
func MustParse(text string) []int {
	t, err := Parse(text)
	if err != nil {
		panic(err)
	}
	return t
}

func tokenIndex(s string) int {
	for i, v := range Vocab {
		if v == s {
			return i
		}
	}
	return -1
}

// Verify is the course's verifier: 1 if the response ended with <eos> and its digits are the
// prompt's answer, else 0.
func Verify(prompt string, tokens []int) float64 {
	n := len(tokens)
	if n == 0 || tokens[n-1] != EOS {
		return 0.0
	}
	if Show(tokens[:n-1]) == Answers[prompt] {
		return 1.0
	}
	return 0.0
}

// SeqLogp is log π(y|x) = Σ_t log π(y_t | x, y<t) (식 (8.1)), summed left to right.
func SeqLogp(lm *TinyLM, prompt string, tokens []int) float64 {
	return sum(lm.TokenLogps(prompt, tokens))
}

// CorrectResponse is the prompt's answer followed by <eos>.
func CorrectResponse(prompt string) []int { return MustParse(Answers[prompt] + eosMark) }

// PCorrect is P(answer⏎ | x) = exp(log π(answer⏎ | x)).
func PCorrect(lm *TinyLM, prompt string) float64 {
	return math.Exp(SeqLogp(lm, prompt, CorrectResponse(prompt)))
}

// Response is one complete response and its probability under the model that listed it.
type Response struct {
	Tokens []int
	Prob   float64
}

// AllResponses lists every response (ending at <eos> or after MaxNewTokens) depth-first in Vocab
// order, with prob = the product of its per-token probabilities; it creates every row it visits.
func AllResponses(lm *TinyLM, prompt string) []Response {
	var out []Response
	var walk func(prefix []int, prob float64)
	walk = func(prefix []int, prob float64) {
		p := lm.Dist(prompt, prefix)
		for tok, pt := range p {
			y := append(append([]int(nil), prefix...), tok)
			q := prob * pt
			if tok == EOS || len(y) == MaxNewTokens {
				out = append(out, Response{y, q})
			} else {
				walk(y, q)
			}
		}
	}
	walk(nil, 1.0)
	return out
}

// KL is the exact KL(π‖π_ref) over all responses: Σ_y π(y)·(log π(y) − log π_ref(y)).
func KL(lm, ref *TinyLM, prompt string) float64 {
	s := 0.0
	for _, r := range AllResponses(lm, prompt) {
		s += float64(r.Prob * (SeqLogp(lm, prompt, r.Tokens) - SeqLogp(ref, prompt, r.Tokens)))
	}
	return s
}

// sum adds left to right, as CPython 3.11's sum() does.
func sum(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s
}
