package dpo

import "github.com/posttrain/posttrain/models/encode"

// Truncate is TRL v0.24 DPOTrainer's truncation of one row. At tokenization (tokenize_row) the
// prompt keeps its last MaxPrompt tokens and the completion (EOS already appended) its first
// MaxCompletion; then (concatenated_forward) when prompt+completion is longer than Max, keep_start
// keeps its first Max tokens (flush_left, then the first max_length columns) and keep_end its last
// Max tokens (flush_right, the last max_length columns, flush_left), the loss mask cut with the
// ids. keep_end can so drop the whole prompt (a completion of ≥ Max tokens), keep_start the whole
// completion (a prompt of ≥ Max tokens).
func Truncate(p, c []int, l encode.Lengths) (prompt, completion []int) {
	if l.MaxPrompt > 0 && len(p) > l.MaxPrompt {
		p = p[len(p)-l.MaxPrompt:]
	}
	if l.MaxCompletion > 0 && len(c) > l.MaxCompletion {
		c = c[:l.MaxCompletion]
	}
	if l.Max <= 0 || len(p)+len(c) <= l.Max {
		return p, c
	}
	if l.Mode == encode.KeepStart {
		if len(p) >= l.Max {
			return p[:l.Max], nil
		}
		return p, c[:l.Max-len(p)]
	}
	over := len(p) + len(c) - l.Max // tokens cut from the start of prompt+completion
	if over <= len(p) {
		return p[over:], c
	}
	return nil, c[over-len(p):]
}

// Truncation is Truncate as models/encode's hook: the EOS text is appended to a standard completion
// before tokenizing (tokenize_row), so it can be cut.
func Truncation(l encode.Lengths) encode.Truncation {
	return encode.Truncation{Lengths: l, Cut: func(p, c []int, _, _ int) ([]int, []int) { return Truncate(p, c, l) }}
}
