package encode_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/encode"
)

// Llama 3.1 and Gemma 3 (data/tokenizer/testdata): standard SFT text gets the tokenizer's BOS in
// front, as TRL's processing_class(text=...) gives; a conversation rendered by the chat template,
// which writes bos_token itself, keeps exactly one; a doubled BOS in the text is an error.
func TestEncode_FamiliesBOS(t *testing.T) {
	for _, tc := range []struct{ dir, bos, eos string }{
		{"../../data/tokenizer/testdata/llama3", "<|begin_of_text|>", "<|eot_id|>"},
		{"../../data/tokenizer/testdata/gemma3", "<bos>", "<end_of_turn>"},
	} {
		txt, err := encode.Load(tc.dir, encode.Options{})
		if err != nil {
			t.Fatal(err)
		}
		tok := txt.Tokenizer
		bos, _ := tok.TokenToID(tc.bos)
		if txt.BOS() != bos {
			t.Errorf("%s: BOS() = %d, want %d", tc.dir, txt.BOS(), bos)
		}
		// Standard text: BOS + text + EOS (TRL: tokenizer(text + eos_token)).
		ids, err := txt.EncodeText("2×3=6", true)
		if want := tok.EncodeSpecial("2×3=6" + tc.eos); err != nil || !slices.Equal(ids, want) || ids[0] != bos {
			t.Errorf("%s: EncodeText = %v (%v), want %v", tc.dir, ids, err, want)
		}
		ids, start, err := txt.EncodeJoined("2×3=", "6", true)
		if want := tok.EncodeSpecial("2×3=6" + tc.eos); err != nil || !slices.Equal(ids, want) || start != len(tok.EncodeSpecial("2×3=")) {
			t.Errorf("%s: EncodeJoined = %v start %d (%v), want %v start %d", tc.dir, ids, start, err, want, len(tok.EncodeSpecial("2×3=")))
		}
		// A rendered conversation: one BOS, the template's.
		msgs := []chat.Message{{Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello."}}
		text, err := txt.Template.Render(msgs, chat.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(text, tc.bos) {
			t.Fatalf("%s: the template does not write %s: %q", tc.dir, tc.bos, text)
		}
		ids, err = txt.EncodeText(text, false)
		if err != nil || !slices.Equal(ids, tok.Encode(text)) || slices.Contains(ids[1:], bos) {
			t.Errorf("%s: EncodeText(rendered) = %v (%v), want %v with one BOS", tc.dir, ids, err, tok.Encode(text))
		}
		chatIDs, _, err := txt.EncodeChat(msgs, nil)
		if err != nil || !slices.Equal(chatIDs, ids) {
			t.Errorf("%s: EncodeChat = %v (%v), want %v", tc.dir, chatIDs, err, ids)
		}
		// TRL #1591: BOS written twice.
		if _, err := txt.EncodeText(tc.bos+text, false); err == nil || !strings.Contains(err.Error(), "doubled special token "+tc.bos) {
			t.Errorf("%s: doubled BOS: err %v", tc.dir, err)
		}
	}
}
