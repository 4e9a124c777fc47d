package chat_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tokenizer"
)

// The assistant masks and the doubled-token check on the real Qwen tokenizer (data/tokenizer's
// copy of the fixture): every span boundary the Qwen templates produce must fall on a token
// boundary of the whole conversation's encoding.
func TestTokenize_QwenBPE(t *testing.T) {
	tok, err := tokenizer.Load("../tokenizer/testdata/tokenizer.json.gz")
	if err != nil {
		t.Skipf("the Qwen tokenizer fixture does not load: %v", err)
	}
	special := map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
	imEnd, ok := tok.TokenToID("<|im_end|>")
	if !ok {
		t.Fatal("no <|im_end|> in the vocabulary")
	}
	convs := [][]chat.Message{
		{{Role: "user", Content: "12×13는 얼마인가요? 숫자 하나로만 답하세요."}, {Role: "assistant", Content: "156"}},
		{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}, {Role: "assistant", Content: "Hello! How can I help?"},
			{Role: "user", Content: "Tell me a joke."}, {Role: "assistant", Content: " Why did the chicken\ncross the road?\n\n"}},
		{{Role: "user", Content: "3×4?"}, {Role: "assistant", Content: "<think>\n3 fours\n</think>\n\n12"}},
	}
	for _, name := range []string{"qwen25_chat_template.jinja", "qwen3_chat_template.jinja"} {
		src, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := chat.Parse(string(src), special)
		if err != nil {
			t.Fatal(err)
		}
		for i, msgs := range convs {
			got, err := tpl.Tokenize(tok, msgs, chat.Options{})
			if err != nil {
				t.Fatalf("%s conv %d: %v", name, i, err)
			}
			var masked []int
			for j, m := range got.Mask {
				if m {
					masked = append(masked, got.IDs[j])
				}
			}
			// The masked tokens decode to the spans' text and end with <|im_end|>.
			var want strings.Builder
			for _, s := range got.Spans {
				want.WriteString(got.Text[s.Start:s.End])
			}
			if dec := tok.Decode(masked, false); dec != want.String() || masked[len(masked)-1] != imEnd {
				t.Errorf("%s conv %d: masked tokens decode to %q, want %q", name, i, dec, want.String())
			}
			ids := chat.SpecialIDs(tok, tpl.SpecialStrings())
			if err := chat.CheckDoubledIDs(got.IDs, ids, nil); err != nil {
				t.Errorf("%s conv %d: %v", name, i, err)
			}
			// TRL #4481: EOS appended after the template's "<|im_end|>\n".
			nl := tok.Encode("\n")
			bad := slices.Concat(got.IDs, []int{imEnd})
			if err := chat.CheckDoubledIDs(bad, ids, func(id int) bool { return slices.Contains(nl, id) }); err == nil {
				t.Errorf("%s conv %d: appended EOS not caught", name, i)
			}
		}
	}
}

// Templates render concurrently (each call has its own context).
func TestRender_Concurrent(t *testing.T) {
	tpl, err := chat.Load("testdata")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "user", Content: "3×4?"}, {Role: "assistant", Content: "12"}}
	want, err := tpl.Render(msgs, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 20; k++ {
				if got, err := tpl.Render(msgs, chat.Options{AddGenerationPrompt: true}); err != nil || got != want {
					errs <- got
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for got := range errs {
		t.Errorf("concurrent render gave %q", got)
	}
}
