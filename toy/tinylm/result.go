package tinylm

import (
	"encoding/json"
	"errors"

	"github.com/posttrain/posttrain/internal/pyfmt"
)

// TraceLen is how many sampled responses a result keeps (the goldens' samples_head).
const TraceLen = 32

// Sample is one sampled response; it marshals as the goldens' ["<prompt>", "<shown response>"].
type Sample struct{ Prompt, Response string }

// MarshalJSON writes [prompt, response].
func (s Sample) MarshalJSON() ([]byte, error) { return json.Marshal([2]string{s.Prompt, s.Response}) }

// tracer keeps the first TraceLen samples of a run, in sampling order.
type tracer struct{ head []Sample }

func (t *tracer) record(prompt string, tokens []int) {
	if len(t.head) < TraceLen {
		t.head = append(t.head, Sample{prompt, Show(tokens)})
	}
}

// Score is one named number of an ordered map.
type Score struct {
	Key   string
	Value float64
}

// Scores is an ordered map of numbers; it marshals as a JSON object in its order.
type Scores []Score

// Get returns the value of key and whether it is present.
func (s Scores) Get(key string) (float64, bool) {
	for _, e := range s {
		if e.Key == key {
			return e.Value, true
		}
	}
	return 0, false
}

// MarshalJSON writes {"key": value, ...} in order.
func (s Scores) MarshalJSON() ([]byte, error) {
	return marshalObject(len(s), func(i int) (string, any) { return s[i].Key, s[i].Value })
}

// MarshalJSON writes {"<prompt>|<prefix>": [logits], ...} in row order.
func (l Logits) MarshalJSON() ([]byte, error) {
	return marshalObject(len(l), func(i int) (string, any) { return l[i].Key.String(), l[i].Logits })
}

// PromptResult is one prompt's outcome after training: P(answer) before (π_ref) and after, the
// exact KL(π‖π_ref), and for RLHF the KL-regularised optimum's P(answer).
type PromptResult struct {
	Prompt   string   `json:"-"`
	PRef     float64  `json:"p_ref"`
	PCorrect float64  `json:"p_correct"`
	Optimum  *float64 `json:"optimum,omitempty"`
	KL       float64  `json:"kl"`
}

// PromptResults marshals as {"<prompt>": {...}, ...} in order.
type PromptResults []PromptResult

// MarshalJSON writes the results keyed by prompt.
func (p PromptResults) MarshalJSON() ([]byte, error) {
	return marshalObject(len(p), func(i int) (string, any) { return p[i].Prompt, p[i] })
}

// Evaluate scores lm against ref for every prompt: P(answer) under both, then the exact KL.
func Evaluate(lm, ref *TinyLM) PromptResults {
	out := make(PromptResults, len(Prompts))
	for i, x := range Prompts {
		out[i] = PromptResult{Prompt: x, PRef: PCorrect(ref, x), PCorrect: PCorrect(lm, x)}
		out[i].KL = KL(lm, ref, x)
	}
	return out
}

// marshalObject writes a JSON object from n ordered (key, value) pairs.
func marshalObject(n int, kv func(i int) (string, any)) ([]byte, error) {
	d := make(pyfmt.Dict, n)
	for i := range d {
		d[i].Key, d[i].Value = kv(i)
	}
	return d.MarshalJSON()
}

// errPositive is returned by the Validate methods.
var errPositive = errors.New("iterations, group sizes, epochs and learning rates must be positive")
