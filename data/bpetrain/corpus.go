package bpetrain

import (
	_ "embed"
	"fmt"
	"strconv"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
)

// ChatTemplate is Qwen2.5-Instruct's chat_template, byte for byte (a copy of
// data/chat/testdata/qwen25_chat_template.jinja, from the project's shared fixtures; a test keeps
// the two equal). With no system message it writes Qwen2.5's default system prompt.
//
//go:embed qwen25_chat_template.jinja
var ChatTemplate string

// The demo tokenizer's settings. The demo corpus runs out of pairs first: the demo tokenizer has
// 352 tokens (256 bytes, 93 merged words and pieces, 3 special tokens).
const (
	DemoVocabSize    = 512
	DemoMinFrequency = 2
)

// Demo trains the demo tokenizer: DemoCorpus with DemoVocabSize and DemoMinFrequency. Save it to
// get the files `posttrain tokenizer-train --demo` writes.
func Demo() (*Result, error) {
	texts, err := DemoCorpus()
	if err != nil {
		return nil, err
	}
	return Train(Config{VocabSize: DemoVocabSize, MinFrequency: DemoMinFrequency}, texts)
}

// DemoCorpus returns the demo's training texts, the same on every call: every multiplication
// problem a×b of the course's range (a, b in [mult.Lo, mult.Hi]) as a conversation — the user's
// prompt, the assistant's answer — rendered by ChatTemplate (so with Qwen2.5's default system
// prompt and the <|im_start|>/<|im_end|> markup), then the numbers 0-400, one per line.
//
// Qwen's pre-tokenizer makes every digit a word of its own, so numbers never merge: digits stay
// single tokens whatever the corpus, and the numbers only weigh the newline.
func DemoCorpus() ([]string, error) {
	tpl, err := chat.Parse(ChatTemplate, map[string]string{"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"})
	if err != nil {
		return nil, err
	}
	var texts []string
	for a := mult.Lo; a <= mult.Hi; a++ {
		for b := mult.Lo; b <= mult.Hi; b++ {
			p := mult.Problem{A: a, B: b}
			msgs := []chat.Message{{Role: "user", Content: p.Prompt()}, {Role: "assistant", Content: strconv.Itoa(p.Answer())}}
			text, err := tpl.Render(msgs, chat.Options{})
			if err != nil {
				return nil, fmt.Errorf("demo corpus: %w", err)
			}
			texts = append(texts, text)
		}
	}
	for n := 0; n <= 400; n++ {
		texts = append(texts, strconv.Itoa(n)+"\n")
	}
	return texts, nil
}
