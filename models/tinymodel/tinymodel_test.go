package tinymodel

import (
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/models/decoder"
)

// The written directory loads as a model, a tokenizer and a chat template, and the ChatML markup
// encodes to the renumbered special ids.
func TestWrite_Loads(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, cfg, err := decoder.Load(dir, dtypes.Float32); err != nil {
		t.Fatal(err)
	} else if cfg.VocabSize != VocabSize {
		t.Errorf("vocab %d, want %d", cfg.VocabSize, VocabSize)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.VocabSize(); got != VocabSize {
		t.Errorf("tokenizer vocab %d, want %d", got, VocabSize)
	}
	tpl, err := chat.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	text, err := tpl.Render([]chat.Message{{Role: "user", Content: "7×8는?"}}, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(text)
	count := map[int]int{}
	for _, id := range ids {
		count[id]++
	}
	if ids[0] != IMStart || count[IMStart] != 2 || count[IMEnd] != 1 {
		t.Errorf("ids %v: want <|im_start|>=%d first and twice, <|im_end|>=%d once", ids, IMStart, IMEnd)
	}
	if got := tok.Decode(ids, false); got != text {
		t.Errorf("decode = %q, want %q", got, text)
	}
}
