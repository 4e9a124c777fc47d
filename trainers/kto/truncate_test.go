package kto_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/kto"
)

func seq(from, to int) []int {
	var s []int
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

// TRL v0.24 kto_trainer.py _process_tokens (decoder-only): max_length −1 when the prompt does not
// start with bos_token_id (None for Qwen2, so always), −1 when the answer does not end with
// eos_token_id; if prompt+answer is longer, the prompt keeps [:max_prompt_length] (keep_start) or
// [-max_prompt_length:] (keep_end); if still longer, the answer keeps [:max_length −
// max_prompt_length]; then BOS is prepended (when the tokenizer has one) and EOS appended where
// the cut answer does not end with it. EOS is 99; prompt ids 11…, answer ids 21….
func TestTruncate(t *testing.T) {
	const noBOS, eos = -1, 99
	for _, tc := range []struct {
		name     string
		p, a     []int
		bos      int
		l        encode.Lengths
		wantP    []int
		wantC    []int
		wantKeep bool
	}{
		{"no limit hit: EOS appended", seq(11, 13), seq(21, 22), noBOS, encode.Lengths{MaxPrompt: 2, Max: 100}, seq(11, 13), []int{21, 22, 99}, true},
		// budget 7−1−1 = 5 < 4+3: prompt[-2:] = 13 14; 2+3 ≤ 5, the answer stays whole.
		{"prompt cut, keep_end", seq(11, 14), seq(21, 23), noBOS, encode.Lengths{MaxPrompt: 2, Max: 7}, seq(13, 14), []int{21, 22, 23, 99}, true},
		// Same with keep_start: prompt[:2] = 11 12.
		{"prompt cut, keep_start", seq(11, 14), seq(21, 23), noBOS, encode.Lengths{MaxPrompt: 2, Max: 7, Mode: encode.KeepStart}, seq(11, 12), []int{21, 22, 23, 99}, true},
		// budget 5; prompt → 13 14; 2+5 > 5, answer[:5−2] = 21 22 23.
		{"answer cut after the prompt", seq(11, 14), seq(21, 25), noBOS, encode.Lengths{MaxPrompt: 2, Max: 7}, seq(13, 14), []int{21, 22, 23, 99}, true},
		// budget 8−2 = 6; the prompt (2 ≤ 3) stays; 2+7 > 6, answer[:6−3] (max_prompt_length, not
		// the prompt's 2 tokens) = 21 22 23.
		{"answer cut by max_length − max_prompt_length", seq(11, 12), seq(21, 27), noBOS, encode.Lengths{MaxPrompt: 3, Max: 8}, seq(11, 12), []int{21, 22, 23, 99}, true},
		// A tokenizer with BOS 1: prepended to the prompt.
		{"BOS prepended", seq(11, 13), []int{21}, 1, encode.Lengths{MaxPrompt: 2, Max: 100}, []int{1, 11, 12, 13}, []int{21, 99}, true},
		// The answer ends with EOS: budget 4−1 = 3; prompt → 12 13; answer[:3−2] = 21, whose
		// missing EOS is appended again after the cut.
		{"EOS cut off is appended again", seq(11, 13), []int{21, 99}, noBOS, encode.Lengths{MaxPrompt: 2, Max: 4}, seq(12, 13), []int{21, 99}, true},
		// budget 6−2 = 4 = max_prompt_length: answer[:0] would keep none of its tokens.
		{"answer cut away entirely", seq(11, 16), seq(21, 22), noBOS, encode.Lengths{MaxPrompt: 4, Max: 6}, nil, nil, false},
		// max_completion_length is ignored: TRL applies it to encoder-decoder models only.
		{"max_completion_length ignored", seq(11, 12), seq(21, 25), noBOS, encode.Lengths{MaxPrompt: 2, MaxCompletion: 1, Max: 100}, seq(11, 12), []int{21, 22, 23, 24, 25, 99}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gotP, gotC, keep := kto.Truncate(tc.p, tc.a, tc.bos, eos, tc.l)
			if keep != tc.wantKeep || !slices.Equal(gotP, tc.wantP) || !slices.Equal(gotC, tc.wantC) {
				t.Errorf("Truncate = %v | %v (keep %v), want %v | %v (keep %v)", gotP, gotC, keep, tc.wantP, tc.wantC, tc.wantKeep)
			}
		})
	}
}

// EncodePair with KTO's Truncation on the tiny model's Qwen tokenizer: the completion is tokenized
// without the EOS, whose id Truncate appends after the cut, and a completion cut away entirely is
// an error, not a silent zero-gradient row.
func TestEncodePair_TruncationAndZeroCompletion(t *testing.T) {
	txt := looptest.Load(t, looptest.Model(t), false).Text
	prompt, completion := "1 2 3 4 5 6 7 8", "9 8 7 6"
	p, a := txt.Tokenizer.Encode(prompt), txt.Tokenizer.Encode(completion)
	if len(p) < 6 || len(a) < 4 {
		t.Fatalf("tokenizer gave %d prompt and %d completion tokens; the cases need ≥ 6 and ≥ 4", len(p), len(a))
	}
	// budget len(a)+4 − 2: the prompt keeps its last 2 tokens (max_prompt_length), the answer
	// stays whole and gets the EOS id.
	got, err := txt.EncodePair(prompt, completion, true, kto.Truncation(encode.Lengths{MaxPrompt: 2, Max: len(a) + 4}))
	if err != nil {
		t.Fatal(err)
	}
	want := append(append(slices.Clone(p[len(p)-2:]), a...), tinymodel.IMEnd)
	if !slices.Equal(got.IDs, toInt32(want)) || got.Start != 2 {
		t.Errorf("keep_end: %v start %d, want %v start 2", got.IDs, got.Start, want)
	}
	// Budget len(p)+1 − 2 < max_prompt_length + 1.
	_, err = txt.EncodePair(prompt, completion, true, kto.Truncation(encode.Lengths{MaxPrompt: len(p), Max: len(p) + 1}))
	if err == nil || !strings.Contains(err.Error(), "nothing") {
		t.Errorf("err = %v, want a completion-with-nothing-to-train error", err)
	}
}

func toInt32(ids []int) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
