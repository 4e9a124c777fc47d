package sft_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// FromTokens on a text row's token ids (EOS appended, as SFT does) is New's trainer on that row:
// the same units, tokens and batch.
func TestFromTokens_IsNewOnTextRows(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	texts := []string{"12 * 34 = 408", "7 * 8 = 56"}
	path := filepath.Join(t.TempDir(), "text.jsonl")
	if err := os.WriteFile(path, []byte(`{"text": "`+texts[0]+`"}`+"\n"+`{"text": "`+texts[1]+`"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := sft.DefaultConfig()
	want, err := sft.New(m, looptest.Read(t, path), cfg)
	if err != nil {
		t.Fatal(err)
	}
	eos, _, err := m.Text.EOS()
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]int32
	for _, s := range texts {
		var ids []int32
		for _, id := range m.Text.Tokenizer.Encode(s + eos) {
			ids = append(ids, int32(id))
		}
		rows = append(rows, ids)
	}
	got, err := sft.FromTokens(m, rows, cfg.LossType)
	if err != nil {
		t.Fatal(err)
	}
	if got.NumExamples() != want.NumExamples() {
		t.Fatalf("%d examples, want %d", got.NumExamples(), want.NumExamples())
	}
	for i := range rows {
		if got.Units(i) != want.Units(i) || got.Tokens(i) != want.Tokens(i) || got.Units(i) != float64(len(rows[i])-1) {
			t.Errorf("row %d: units %v tokens %d, want %v and %d", i, got.Units(i), got.Tokens(i), want.Units(i), want.Tokens(i))
		}
	}
	gb, err1 := got.Batch([]int{1, 0})
	wb, err2 := want.Batch([]int{1, 0})
	if err1 != nil || err2 != nil || !reflect.DeepEqual(gb, wb) {
		t.Errorf("batch %v (%v), want %v (%v)", gb, err1, wb, err2)
	}
	if _, err := sft.FromTokens(m, rows, "kl"); err == nil {
		t.Error("an unknown loss type: want an error")
	}
	if _, err := sft.FromTokens(m, [][]int32{{}}, "nll"); err == nil {
		t.Error("an empty row: want an error")
	}
}
