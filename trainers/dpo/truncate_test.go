package dpo_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TRL v0.24 dpo_trainer.py: DPOTrainer.tokenize_row cuts the prompt to prompt_input_ids[-max_prompt_length:]
// and the completion (EOS appended) to [:max_completion_length]; concatenated_forward then, when
// max_length < the batch width, keeps per row the first max_length tokens of prompt+completion
// (keep_start: flush_left, [:, :max_length]) or the last (keep_end: flush_right,
// [:, -max_length:], flush_left), cutting the loss mask with the ids. Prompt ids are 11…, completion
// ids 21….
func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p, c  []int
		l     encode.Lengths
		wantP []int
		wantC []int
	}{
		{"no limit hit", seq(11, 13), seq(21, 22), encode.Lengths{MaxPrompt: 4, Max: 8}, seq(11, 13), seq(21, 22)},
		// tokenize_row: prompt_input_ids[-4:] of 11..16.
		{"prompt > max_prompt_length keeps its end", seq(11, 16), seq(21, 22), encode.Lengths{MaxPrompt: 4, Max: 100}, seq(13, 16), seq(21, 22)},
		// tokenize_row: chosen_input_ids[:3] of 21..25 (the EOS, last, is cut too).
		{"completion > max_completion_length keeps its start", seq(11, 12), seq(21, 25), encode.Lengths{MaxPrompt: 4, MaxCompletion: 3, Max: 100}, seq(11, 12), seq(21, 23)},
		// keep_end: the last 6 of 11..14 21..24 → 13 14 21..24, completion start 2.
		{"keep_end drops the prompt's start", seq(11, 14), seq(21, 24), encode.Lengths{MaxPrompt: 4, Max: 6}, seq(13, 14), seq(21, 24)},
		{"keep_end spelled out", seq(11, 14), seq(21, 24), encode.Lengths{MaxPrompt: 4, Max: 6, Mode: encode.KeepEnd}, seq(13, 14), seq(21, 24)},
		// keep_start: the first 6 of 11..14 21..24 → 11..14 21 22, completion start 4.
		{"keep_start drops the completion's end", seq(11, 14), seq(21, 24), encode.Lengths{MaxPrompt: 4, Max: 6, Mode: encode.KeepStart}, seq(11, 14), seq(21, 22)},
		// keep_end with a completion of 8 > max_length 6: the last 6 tokens are all completion.
		{"keep_end drops the whole prompt", seq(11, 12), seq(21, 28), encode.Lengths{MaxPrompt: 4, Max: 6}, nil, seq(23, 28)},
		// keep_start with a prompt of 6 ≥ max_length 5 (no max_prompt_length): no completion left.
		{"keep_start drops the whole completion", seq(11, 16), seq(21, 22), encode.Lengths{Max: 5, Mode: encode.KeepStart}, seq(11, 15), nil},
		// Both stages: 12 13 | 21..24 (max_completion_length 4), then the last 5 → 13 21..24.
		{"tokenize_row cuts come before max_length", seq(11, 13), seq(21, 25), encode.Lengths{MaxPrompt: 2, MaxCompletion: 4, Max: 5}, seq(13, 13), seq(21, 24)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotP, gotC := dpo.Truncate(tc.p, tc.c, tc.l)
			if !slices.Equal(gotP, tc.wantP) || !slices.Equal(gotC, tc.wantC) {
				t.Errorf("Truncate = %v | %v, want %v | %v", gotP, gotC, tc.wantP, tc.wantC)
			}
		})
	}
}

// EncodePair with DPO's Truncation on the tiny model's Qwen tokenizer: the completion (EOS
// appended as text before the cut) starts where Truncate puts it, and a row left with no scored
// completion token is an error, not a silent zero-gradient row.
func TestEncodePair_TruncationAndZeroCompletion(t *testing.T) {
	txt := looptest.Load(t, looptest.Model(t), false).Text
	prompt, completion := "1 2 3 4 5 6 7 8", "9 8 7 6"
	p, c := txt.Tokenizer.Encode(prompt), txt.Tokenizer.Encode(completion+"<|im_end|>")
	if len(p) < 6 || len(c) < 4 {
		t.Fatalf("tokenizer gave %d prompt and %d completion tokens; the cases need ≥ 6 and ≥ 4", len(p), len(c))
	}
	// keep_end, max_length len(c)+2: the last 2 prompt tokens, the whole completion (with EOS).
	got, err := txt.EncodePair(prompt, completion, true, dpo.Truncation(encode.Lengths{MaxPrompt: len(p), Max: len(c) + 2}))
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(p[len(p)-2:]), c...)
	if !slices.Equal(got.IDs, toInt32(want)) || got.Start != 2 {
		t.Errorf("keep_end: %v start %d, want %v start 2", got.IDs, got.Start, want)
	}
	for _, tc := range []struct {
		name string
		l    encode.Lengths
	}{
		// keep_start with max_length = the prompt's length: the completion is cut away.
		{"keep_start", encode.Lengths{Max: len(p), Mode: encode.KeepStart}},
		// keep_end with max_length 1: one completion token and no prompt, so nothing predicts it.
		{"keep_end", encode.Lengths{Max: 1}},
	} {
		if _, err := txt.EncodePair(prompt, completion, true, dpo.Truncation(tc.l)); err == nil || !strings.Contains(err.Error(), "nothing") {
			t.Errorf("%s: err = %v, want a completion-with-nothing-to-train error", tc.name, err)
		}
	}
}

func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
