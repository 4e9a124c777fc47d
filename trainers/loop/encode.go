package loop

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/qwen2"
	"github.com/posttrain/posttrain/trainers/step"
)

// Encoded is a prompt followed by a completion, as token ids; the completion starts at Start.
type Encoded struct {
	IDs   []int32
	Start int
}

// Completion returns the completion's length in tokens.
func (e Encoded) Completion() int { return len(e.IDs) - e.Start }

// Truncation modes, TRL's truncation_mode values.
const (
	KeepEnd   = "keep_end"
	KeepStart = "keep_start"
)

// Lengths are the truncation limits of preference-style trainers, TRL's max_prompt_length,
// max_completion_length and max_length (0 = no limit) and truncation_mode ("" = keep_end). KTO
// selects TRL KTOTrainer's own rule (TruncateKTO) instead of DPOTrainer's (TruncateDPO).
type Lengths struct {
	MaxPrompt, MaxCompletion, Max int
	Mode                          string
	KTO                           bool
}

func (l Lengths) String() string {
	mode := l.Mode
	if mode == "" {
		mode = KeepEnd
	}
	return fmt.Sprintf("max_prompt_length %d, max_completion_length %d, max_length %d, truncation_mode %s",
		l.MaxPrompt, l.MaxCompletion, l.Max, mode)
}

// TruncateDPO is TRL v0.24 DPOTrainer's truncation of one row. At tokenization (tokenize_row) the
// prompt keeps its last MaxPrompt tokens and the completion (EOS already appended) its first
// MaxCompletion; then (concatenated_forward) when prompt+completion is longer than Max, keep_start
// keeps its first Max tokens (flush_left, then the first max_length columns) and keep_end its last
// Max tokens (flush_right, the last max_length columns, flush_left), the loss mask cut with the
// ids. keep_end can so drop the whole prompt (a completion of ≥ Max tokens), keep_start the whole
// completion (a prompt of ≥ Max tokens).
func TruncateDPO(p, c []int, l Lengths) (prompt, completion []int) {
	if l.MaxPrompt > 0 && len(p) > l.MaxPrompt {
		p = p[len(p)-l.MaxPrompt:]
	}
	if l.MaxCompletion > 0 && len(c) > l.MaxCompletion {
		c = c[:l.MaxCompletion]
	}
	if l.Max <= 0 || len(p)+len(c) <= l.Max {
		return p, c
	}
	if l.Mode == KeepStart {
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

// TruncateKTO is TRL v0.24 KTOTrainer's _process_tokens for a decoder-only model. The budget is Max
// less one token for a BOS the prompt does not start with (reserved even when the tokenizer has
// none, as TRL compares bos_token_id None with the first id) and one for the EOS appended later
// (eos ≥ 0 and the completion does not end with it). If prompt+completion exceeds the budget the
// prompt keeps its first (keep_start) or last (keep_end) MaxPrompt tokens; if it still does, the
// completion keeps its first budget−MaxPrompt tokens. Then the tokenizer's BOS (bos ≥ 0) is
// prepended and EOS appended where the cut prompt and completion lack them (an EOS cut off is
// appended again, as in TRL). max_completion_length plays no part: TRL applies it to
// encoder-decoder models only. keep is false when the completion's own tokens are all cut
// (budget ≤ MaxPrompt): TRL would keep a[:budget−MaxPrompt], nothing or a Python negative slice.
func TruncateKTO(p, a []int, bos, eos int, l Lengths) (prompt, completion []int, keep bool) {
	budget := l.Max
	if len(p) > 0 && (bos < 0 || p[0] != bos) {
		budget--
	}
	if eos >= 0 && len(a) > 0 && a[len(a)-1] != eos {
		budget--
	}
	if l.Max > 0 && len(p)+len(a) > budget && l.MaxPrompt > 0 && len(p) > l.MaxPrompt {
		if l.Mode == KeepStart {
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

// EncodePair tokenizes a rendered prompt and completion separately and truncates them by
// TruncateDPO, or TruncateKTO when l.KTO. With addEOS (standard data) the tokenizer's EOS ends the
// completion unless it already does: appended to the text before tokenizing, as DPOTrainer's
// tokenize_row, or after truncation, as KTO's _process_tokens. A doubled special token in the text
// is an error, and so is a completion left with no scored token (its own tokens all cut, or one
// token after a prompt cut away entirely: nothing predicts it), which would train on nothing.
func (m *Model) EncodePair(prompt, completion string, addEOS bool, l Lengths) (Encoded, error) {
	eosText, eos := "", -1
	if addEOS {
		var err error
		if eosText, eos, err = m.EOS(); err != nil {
			return Encoded{}, err
		}
		if strings.HasSuffix(completion, eosText) {
			eosText = ""
		}
	}
	if err := chat.CheckDoubledText(prompt+completion+eosText, m.Specials()); err != nil {
		return Encoded{}, err
	}
	p := m.Tokenizer.Encode(prompt)
	var c []int
	if l.KTO {
		a := m.Tokenizer.Encode(completion)
		if len(a) == 0 {
			return Encoded{}, fmt.Errorf("empty completion")
		}
		var ok bool
		if p, c, ok = TruncateKTO(p, a, m.bos(), eos, l); !ok {
			return Encoded{}, fmt.Errorf("completion of %d tokens cut away entirely by truncation (%s): it would train on nothing", len(a), l)
		}
	} else {
		full := m.Tokenizer.Encode(completion + eosText)
		if len(full) == 0 {
			return Encoded{}, fmt.Errorf("empty completion")
		}
		p, c = TruncateDPO(p, full, l)
		if len(c) == 0 {
			return Encoded{}, fmt.Errorf("completion of %d tokens cut away entirely by truncation (%s): it would train on nothing", len(full), l)
		}
	}
	if len(p) == 0 && len(c) < 2 {
		return Encoded{}, fmt.Errorf("truncation (%s) leaves one completion token and no prompt: nothing predicts it, so the row would train on nothing", l)
	}
	ids := make([]int32, 0, len(p)+len(c))
	for _, id := range append(p, c...) {
		ids = append(ids, int32(id))
	}
	return Encoded{IDs: ids, Start: len(p)}, nil
}

// bos is the id of the tokenizer's bos_token, -1 if it has none (Qwen2).
func (m *Model) bos() int {
	if b := m.Tokenizer.Config().BOSToken; b != "" {
		if id, ok := m.Tokenizer.TokenToID(b); ok {
			return id
		}
	}
	return -1
}

// EncodedRows pads rows (right, to a bucket) with the completions scored.
func EncodedRows(rows []Encoded) Rows {
	ids, from := make([][]int32, len(rows)), make([]int, len(rows))
	for i, r := range rows {
		ids[i], from[i] = r.IDs, r.Start
	}
	return PadRows(ids, from, Bucket(MaxLen(ids)))
}

// SequenceLogProbs returns, for every row, log π(completion | prompt) = Σ_t lp_t over the
// completion tokens (step.SeqSum) and its per-token mean (step.SeqMean), under the model's current
// weights: the frozen reference of DPO and KTO when called before training. Rows are run in
// batches of batch, in order. Values are the float32 results, so feeding them back as inputs
// reproduces what the graph computed.
func SequenceLogProbs(backend backends.Backend, m *Model, rows []Encoded, batch int) (sums, means []float32, err error) {
	cfg := m.Config
	ev, err := step.NewContextEval(backend, m.Ctx.Reuse(), func(ctx *context.Context, in []*graph.Node) []*graph.Node {
		lp := qwen2.TokenLogProbs(ctx, cfg, in[0], in[1], in[2])
		return []*graph.Node{step.SeqSum(lp, in[3]), step.SeqMean(lp, in[3])}
	})
	if err != nil {
		return nil, nil, err
	}
	for lo := 0; lo < len(rows); lo += batch {
		outs, err := ev.Run(EncodedRows(rows[lo:min(lo+batch, len(rows))]).Inputs()...)
		if err != nil {
			return nil, nil, err
		}
		for k, dst := range []*[]float32{&sums, &means} {
			if outs[k].DType() != dtypes.Float32 {
				return nil, nil, fmt.Errorf("sequence log-probs: dtype %s, want float32", outs[k].DType())
			}
			*dst = append(*dst, outs[k].Value().([]float32)...)
		}
	}
	return sums, means, nil
}
