package kto

import "github.com/posttrain/posttrain/models/encode"

// Truncate is TRL v0.24 KTOTrainer's _process_tokens for a decoder-only model. The budget is Max
// less one token for a BOS the prompt does not start with (reserved even when the tokenizer has
// none, as TRL compares bos_token_id None with the first id) and one for the EOS appended later
// (eos ≥ 0 and the completion does not end with it). If prompt+completion exceeds the budget the
// prompt keeps its first (keep_start) or last (keep_end) MaxPrompt tokens; if it still does, the
// completion keeps its first budget−MaxPrompt tokens. Then the tokenizer's BOS (bos ≥ 0) is
// prepended and EOS appended where the cut prompt and completion lack them (an EOS cut off is
// appended again, as in TRL). max_completion_length plays no part: TRL applies it to
// encoder-decoder models only. keep is false when the completion's own tokens are all cut
// (budget ≤ MaxPrompt): TRL would keep a[:budget−MaxPrompt], nothing or a Python negative slice.
func Truncate(p, a []int, bos, eos int, l encode.Lengths) (prompt, completion []int, keep bool) {
	budget := l.Max
	if len(p) > 0 && (bos < 0 || p[0] != bos) {
		budget--
	}
	if eos >= 0 && len(a) > 0 && a[len(a)-1] != eos {
		budget--
	}
	if l.Max > 0 && len(p)+len(a) > budget && l.MaxPrompt > 0 && len(p) > l.MaxPrompt {
		if l.Mode == encode.KeepStart {
			p = p[:l.MaxPrompt]
		} else {
			p = p[len(p)-l.MaxPrompt:]
		}
	}
	if l.Max > 0 && len(p)+len(a) > budget {
		n := budget - l.MaxPrompt
		if n < 1 {
			return nil, nil, false
		}
		a = a[:min(n, len(a))]
	}
	if bos >= 0 && (len(p) == 0 || p[0] != bos) {
		p = append([]int{bos}, p...)
	}
	c := append([]int(nil), a...)
	if eos >= 0 && (len(a) == 0 || a[len(a)-1] != eos) { // checked after the cut, as TRL does
		c = append(c, eos)
	}
	return p, c, true
}

// Truncation is Truncate as models/encode's hook: the completion is tokenized without the EOS, which
// Truncate appends after the cut (_process_tokens); a completion cut away comes back empty.
func Truncation(l encode.Lengths) encode.Truncation {
	return encode.Truncation{Lengths: l, EOSAfterCut: true, Cut: func(p, a []int, bos, eos int) ([]int, []int) {
		p, c, keep := Truncate(p, a, bos, eos, l)
		if !keep {
			return nil, nil
		}
		return p, c
	}}
}
