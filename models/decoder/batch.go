package decoder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/posttrain/posttrain/models/generate"
)

// Batch is a padded batch of token rows with its attention mask (1 = token, 0 = pad) and, for
// scoring, the first position of each row's completion.
type Batch struct {
	IDs             [][]int32
	Mask            [][]int32
	CompletionStart []int
}

// Validate checks that the batch is rectangular, ids are in [0, vocab), the mask is 0/1 and each
// row has a real token.
func (b *Batch) Validate(vocab int) error {
	if len(b.IDs) == 0 || len(b.IDs[0]) == 0 {
		return fmt.Errorf("batch: no tokens")
	}
	if len(b.Mask) != len(b.IDs) {
		return fmt.Errorf("batch: %d mask rows for %d id rows", len(b.Mask), len(b.IDs))
	}
	if b.CompletionStart != nil && len(b.CompletionStart) != len(b.IDs) {
		return fmt.Errorf("batch: %d completion starts for %d rows", len(b.CompletionStart), len(b.IDs))
	}
	s := len(b.IDs[0])
	for r := range b.IDs {
		if len(b.IDs[r]) != s || len(b.Mask[r]) != s {
			return fmt.Errorf("batch: row %d has %d ids and %d mask values, row 0 has %d ids", r, len(b.IDs[r]), len(b.Mask[r]), s)
		}
		if b.CompletionStart != nil && (b.CompletionStart[r] < 0 || b.CompletionStart[r] >= s) {
			return fmt.Errorf("batch: completion_start %d of row %d is outside the row's positions [0, %d)", b.CompletionStart[r], r, s)
		}
		real := 0
		for t, id := range b.IDs[r] {
			if id < 0 || int(id) >= vocab {
				return fmt.Errorf("batch: token id %d at row %d position %d is outside the vocabulary [0, %d)", id, r, t, vocab)
			}
			if m := b.Mask[r][t]; m != 0 && m != 1 {
				return fmt.Errorf("batch: attention mask value %d at row %d position %d (want 0 or 1)", m, r, t)
			}
			real += int(b.Mask[r][t])
		}
		if real == 0 {
			return fmt.Errorf("batch: row %d has no real token", r)
		}
	}
	return nil
}

// Dims returns the batch size and sequence length.
func (b *Batch) Dims() (rows, seqLen int) { return len(b.IDs), len(b.IDs[0]) }

// PositionIDs are HF's position ids cumsum(mask)−1, with pads set to 1 (they never reach a real
// token through attention): the rule every family shares, generate.PositionIDs.
func PositionIDs(mask [][]int32) [][]int32 { return generate.PositionIDs(mask) }

// SegmentPositionIDs are the position ids of packed rows (seg [B,S], 1, 2, … per sequence, 0 =
// padding): 0, 1, … restarting at each sequence's first token, as TRL's collator builds them from
// seq_lengths (get_position_ids_from_packed_seq_lengths); pads get 0 (TRL's padding value).
func SegmentPositionIDs(seg [][]int32) [][]int32 {
	out := make([][]int32, len(seg))
	for r, row := range seg {
		out[r] = make([]int32, len(row))
		var p int32
		for t, s := range row {
			if t > 0 && s == row[t-1] {
				p++
			} else {
				p = 0
			}
			if s == 0 {
				p = 0
			}
			out[r][t] = p
		}
	}
	return out
}

// ScoredMask marks the tokens whose log-prob counts: t ≥ completionStart[b], t ≥ 1 and
// mask[b,t] = mask[b,t−1] = 1. A nil completionStart scores from t = 1.
func ScoredMask(mask [][]int32, completionStart []int) [][]float32 {
	out := make([][]float32, len(mask))
	for r, row := range mask {
		out[r] = make([]float32, len(row))
		start := 1
		if completionStart != nil {
			start = max(1, completionStart[r])
		}
		for t := start; t < len(row); t++ {
			if row[t] == 1 && row[t-1] == 1 {
				out[r][t] = 1
			}
		}
	}
	return out
}

// LastIndex is each row's last real position.
func LastIndex(mask [][]int32) []int {
	out := make([]int, len(mask))
	for r, row := range mask {
		for t, m := range row {
			if m == 1 {
				out[r] = t
			}
		}
	}
	return out
}

// batchJSON is the input format of the qwen2-tiny fixtures: completion_start is one position for
// every row or one per row; attention_mask defaults to all ones.
type batchJSON struct {
	InputIDs        [][]int32       `json:"input_ids"`
	AttentionMask   [][]int32       `json:"attention_mask"`
	CompletionStart json.RawMessage `json:"completion_start"`
	MaxNewTokens    int             `json:"max_new_tokens"`
}

// ReadBatchJSON reads a batch in the fixtures' input format
// ({"input_ids": [[...]], "attention_mask": [[...]], "completion_start": n | [n...], "max_new_tokens": n}).
// It returns max_new_tokens (0 when absent) for generation.
func ReadBatchJSON(path string) (*Batch, int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	b, n, err := ParseBatchJSON(data)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return b, n, nil
}

// ParseBatchJSON parses the content of a batch file (see ReadBatchJSON).
func ParseBatchJSON(data []byte) (*Batch, int, error) {
	var in batchJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, 0, fmt.Errorf("parse batch: %w", err)
	}
	if len(in.InputIDs) == 0 {
		return nil, 0, fmt.Errorf("parse batch: input_ids is missing or empty")
	}
	b := &Batch{IDs: in.InputIDs, Mask: in.AttentionMask}
	if b.Mask == nil {
		for _, row := range b.IDs {
			ones := make([]int32, len(row))
			for i := range ones {
				ones[i] = 1
			}
			b.Mask = append(b.Mask, ones)
		}
	}
	if cs := bytes.TrimSpace(in.CompletionStart); len(cs) > 0 && string(cs) != "null" {
		var one int
		if err := json.Unmarshal(cs, &one); err == nil {
			for range b.IDs {
				b.CompletionStart = append(b.CompletionStart, one)
			}
		} else if err := json.Unmarshal(cs, &b.CompletionStart); err != nil {
			return nil, 0, fmt.Errorf("parse batch: completion_start must be a position or a list of positions: %w", err)
		}
	}
	if in.MaxNewTokens < 0 || in.MaxNewTokens > generate.MaxLen {
		return nil, 0, fmt.Errorf("parse batch: max_new_tokens must be in [0, %d], got %d", generate.MaxLen, in.MaxNewTokens)
	}
	return b, in.MaxNewTokens, nil
}
