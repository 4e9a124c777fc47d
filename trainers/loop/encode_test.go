package loop_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/loop"
	"github.com/posttrain/posttrain/trainers/loop/looptest"
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
func TestTruncateDPO(t *testing.T) {
	for _, tc := range []struct {
		name  string
		p, c  []int
		l     loop.Lengths
		wantP []int
		wantC []int
	}{
		{"no limit hit", seq(11, 13), seq(21, 22), loop.Lengths{MaxPrompt: 4, Max: 8}, seq(11, 13), seq(21, 22)},
		// tokenize_row: prompt_input_ids[-4:] of 11..16.
		{"prompt > max_prompt_length keeps its end", seq(11, 16), seq(21, 22), loop.Lengths{MaxPrompt: 4, Max: 100}, seq(13, 16), seq(21, 22)},
		// tokenize_row: chosen_input_ids[:3] of 21..25 (the EOS, last, is cut too).
		{"completion > max_completion_length keeps its start", seq(11, 12), seq(21, 25), loop.Lengths{MaxPrompt: 4, MaxCompletion: 3, Max: 100}, seq(11, 12), seq(21, 23)},
		// keep_end: the last 6 of 11..14 21..24 → 13 14 21..24, completion start 2.
		{"keep_end drops the prompt's start", seq(11, 14), seq(21, 24), loop.Lengths{MaxPrompt: 4, Max: 6}, seq(13, 14), seq(21, 24)},
		{"keep_end spelled out", seq(11, 14), seq(21, 24), loop.Lengths{MaxPrompt: 4, Max: 6, Mode: loop.KeepEnd}, seq(13, 14), seq(21, 24)},
		// keep_start: the first 6 of 11..14 21..24 → 11..14 21 22, completion start 4.
		{"keep_start drops the completion's end", seq(11, 14), seq(21, 24), loop.Lengths{MaxPrompt: 4, Max: 6, Mode: loop.KeepStart}, seq(11, 14), seq(21, 22)},
		// keep_end with a completion of 8 > max_length 6: the last 6 tokens are all completion.
		{"keep_end drops the whole prompt", seq(11, 12), seq(21, 28), loop.Lengths{MaxPrompt: 4, Max: 6}, nil, seq(23, 28)},
		// keep_start with a prompt of 6 ≥ max_length 5 (no max_prompt_length): no completion left.
		{"keep_start drops the whole completion", seq(11, 16), seq(21, 22), loop.Lengths{Max: 5, Mode: loop.KeepStart}, seq(11, 15), nil},
		// Both stages: 12 13 | 21..24 (max_completion_length 4), then the last 5 → 13 21..24.
		{"tokenize_row cuts come before max_length", seq(11, 13), seq(21, 25), loop.Lengths{MaxPrompt: 2, MaxCompletion: 4, Max: 5}, seq(13, 13), seq(21, 24)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotP, gotC := loop.TruncateDPO(tc.p, tc.c, tc.l)
			if !slices.Equal(gotP, tc.wantP) || !slices.Equal(gotC, tc.wantC) {
				t.Errorf("TruncateDPO = %v | %v, want %v | %v", gotP, gotC, tc.wantP, tc.wantC)
			}
		})
	}
}

// TRL v0.24 kto_trainer.py _process_tokens (decoder-only): max_length −1 when the prompt does not
// start with bos_token_id (None for Qwen2, so always), −1 when the answer does not end with
// eos_token_id; if prompt+answer is longer, the prompt keeps [:max_prompt_length] (keep_start) or
// [-max_prompt_length:] (keep_end); if still longer, the answer keeps [:max_length −
// max_prompt_length]; then BOS is prepended (when the tokenizer has one) and EOS appended where
// the cut answer does not end with it. EOS is 99; prompt ids 11…, answer ids 21….
func TestTruncateKTO(t *testing.T) {
	const noBOS, eos = -1, 99
	for _, tc := range []struct {
		name     string
		p, a     []int
		bos      int
		l        loop.Lengths
		wantP    []int
		wantC    []int
		wantKeep bool
	}{
		{"no limit hit: EOS appended", seq(11, 13), seq(21, 22), noBOS, loop.Lengths{MaxPrompt: 2, Max: 100}, seq(11, 13), []int{21, 22, 99}, true},
		// budget 7−1−1 = 5 < 4+3: prompt[-2:] = 13 14; 2+3 ≤ 5, the answer stays whole.
		{"prompt cut, keep_end", seq(11, 14), seq(21, 23), noBOS, loop.Lengths{MaxPrompt: 2, Max: 7}, seq(13, 14), []int{21, 22, 23, 99}, true},
		// Same with keep_start: prompt[:2] = 11 12.
		{"prompt cut, keep_start", seq(11, 14), seq(21, 23), noBOS, loop.Lengths{MaxPrompt: 2, Max: 7, Mode: loop.KeepStart}, seq(11, 12), []int{21, 22, 23, 99}, true},
		// budget 5; prompt → 13 14; 2+5 > 5, answer[:5−2] = 21 22 23.
		{"answer cut after the prompt", seq(11, 14), seq(21, 25), noBOS, loop.Lengths{MaxPrompt: 2, Max: 7}, seq(13, 14), []int{21, 22, 23, 99}, true},
		// budget 8−2 = 6; the prompt (2 ≤ 3) stays; 2+7 > 6, answer[:6−3] (max_prompt_length, not
		// the prompt's 2 tokens) = 21 22 23.
		{"answer cut by max_length − max_prompt_length", seq(11, 12), seq(21, 27), noBOS, loop.Lengths{MaxPrompt: 3, Max: 8}, seq(11, 12), []int{21, 22, 23, 99}, true},
		// A tokenizer with BOS 1: prepended to the prompt.
		{"BOS prepended", seq(11, 13), []int{21}, 1, loop.Lengths{MaxPrompt: 2, Max: 100}, []int{1, 11, 12, 13}, []int{21, 99}, true},
		// The answer ends with EOS: budget 4−1 = 3; prompt → 12 13; answer[:3−2] = 21, whose
		// missing EOS is appended again after the cut.
		{"EOS cut off is appended again", seq(11, 13), []int{21, 99}, noBOS, loop.Lengths{MaxPrompt: 2, Max: 4}, seq(12, 13), []int{21, 99}, true},
		// budget 6−2 = 4 = max_prompt_length: answer[:0] would keep none of its tokens.
		{"answer cut away entirely", seq(11, 16), seq(21, 22), noBOS, loop.Lengths{MaxPrompt: 4, Max: 6}, nil, nil, false},
		// max_completion_length is ignored: TRL applies it to encoder-decoder models only.
		{"max_completion_length ignored", seq(11, 12), seq(21, 25), noBOS, loop.Lengths{MaxPrompt: 2, MaxCompletion: 1, Max: 100}, seq(11, 12), []int{21, 22, 23, 24, 25, 99}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotP, gotC, keep := loop.TruncateKTO(tc.p, tc.a, tc.bos, eos, tc.l)
			if keep != tc.wantKeep || !slices.Equal(gotP, tc.wantP) || !slices.Equal(gotC, tc.wantC) {
				t.Errorf("TruncateKTO = %v | %v (keep %v), want %v | %v (keep %v)", gotP, gotC, keep, tc.wantP, tc.wantC, tc.wantKeep)
			}
		})
	}
}

// EncodePair on the tiny model's Qwen tokenizer: the completion starts where TruncateDPO/KTO put
// it, and a row left with no scored completion token is an error, not a silent zero-gradient row.
func TestEncodePair_TruncationAndZeroCompletion(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	prompt, completion := "1 2 3 4 5 6 7 8", "9 8 7 6"
	p, c := m.Tokenizer.Encode(prompt), m.Tokenizer.Encode(completion+"<|im_end|>")
	if len(p) < 6 || len(c) < 4 {
		t.Fatalf("tokenizer gave %d prompt and %d completion tokens; the cases need ≥ 6 and ≥ 4", len(p), len(c))
	}
	// keep_end, max_length len(c)+2: the last 2 prompt tokens, the whole completion (with EOS).
	got, err := m.EncodePair(prompt, completion, true, loop.Lengths{MaxPrompt: len(p), Max: len(c) + 2})
	if err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(p[len(p)-2:]), c...)
	if !slices.Equal(got.IDs, toInt32(want)) || got.Start != 2 {
		t.Errorf("keep_end: %v start %d, want %v start 2", got.IDs, got.Start, want)
	}
	for _, tc := range []struct {
		name string
		l    loop.Lengths
	}{
		// keep_start with max_length = the prompt's length: the completion is cut away.
		{"keep_start", loop.Lengths{Max: len(p), Mode: loop.KeepStart}},
		// keep_end with max_length 1: one completion token and no prompt, so nothing predicts it.
		{"keep_end", loop.Lengths{Max: 1}},
		// KTO: budget len(p)+1 − 2 < max_prompt_length + 1.
		{"kto", loop.Lengths{MaxPrompt: len(p), Max: len(p) + 1, KTO: true}},
	} {
		if _, err := m.EncodePair(prompt, completion, true, tc.l); err == nil || !strings.Contains(err.Error(), "nothing") {
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
