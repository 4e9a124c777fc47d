package bpetrain

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/data/tokenizer"
)

var demo struct {
	once sync.Once
	dir  string
	res  *Result
	err  error
}

// demoDir trains the demo tokenizer once and saves it to a directory shared by the tests.
func demoDir(t *testing.T) (string, *Result) {
	t.Helper()
	demo.once.Do(func() {
		if demo.res, demo.err = Demo(); demo.err != nil {
			return
		}
		if demo.dir, demo.err = os.MkdirTemp("", "bpetrain-demo"); demo.err != nil {
			return
		}
		demo.err = demo.res.Save(demo.dir)
	})
	if demo.err != nil {
		t.Fatal(demo.err)
	}
	return demo.dir, demo.res
}

func TestMain(m *testing.M) {
	code := m.Run()
	if demo.dir != "" {
		os.RemoveAll(demo.dir)
	}
	os.Exit(code)
}

func loadDemo(t *testing.T) *tokenizer.BPE {
	t.Helper()
	dir, _ := demoDir(t)
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Byte-level BPE knows every byte: any NFC text comes back from its ids, with or without the
// added tokens matched.
func TestSaved_RoundTrip(t *testing.T) {
	tok := loadDemo(t)
	for _, s := range []string{
		"", "12×19는 얼마인가요? 숫자 하나로만 답하세요.", "안녕하세요, 세계! 한국어 문장입니다.",
		"0123456789 3.14159 -42 1,000,000", "emoji 👍🏽 🇰🇷 👨‍👩‍👧 ✨", "tabs\t\tand   spaces  \n\n\r\n  end   ",
		"mixed 日本語 中文 Ελληνικά русский العربية", "<|im_start|>user\nhi<|im_end|>\n", "<|im_end", "\x00\x01\x7f",
		"You are Qwen, created by Alibaba Cloud. You are a helpful assistant.",
	} {
		for _, plain := range []bool{false, true} {
			ids := tok.Encode(s)
			if plain {
				ids = tok.EncodePlain(s)
			}
			if got := tok.Decode(ids, false); got != s {
				t.Errorf("plain=%v %q: decoded %q", plain, s, got)
			}
		}
	}
}

func TestSaved_SpecialsAreSingleIDs(t *testing.T) {
	tok := loadDemo(t)
	_, res := demoDir(t)
	n := len(res.Tokens)
	for i, s := range Specials {
		if got := tok.Encode(s); len(got) != 1 || got[0] != n+i {
			t.Errorf("%s: got ids %v, want [%d]", s, got, n+i)
		}
	}
	if got, want := tok.SpecialIDs(), []int{n, n + 1, n + 2}; !slices.Equal(got, want) {
		t.Errorf("SpecialIDs: got %v, want %v", got, want)
	}
	if tok.VocabSize() != res.VocabSize() || res.VocabSize() > DemoVocabSize {
		t.Errorf("VocabSize: loaded %d, trained %d, limit %d", tok.VocabSize(), res.VocabSize(), DemoVocabSize)
	}
	cfg := tok.Config()
	if cfg.EOSToken != "<|im_end|>" || cfg.PadToken != "<|endoftext|>" || cfg.BOSToken != "" || cfg.ModelMaxLength != DefaultModelMaxLength {
		t.Errorf("config: eos %q pad %q bos %q model_max_length %d", cfg.EOSToken, cfg.PadToken, cfg.BOSToken, cfg.ModelMaxLength)
	}
}

// The demo's merges make whole words of the prompt: digits, ×, 는, the four Korean words and the
// two punctuation marks are 12 tokens for 12×19 (Qwen2.5's own tokenizer needs 19).
func TestSaved_DemoPromptIsFewTokens(t *testing.T) {
	tok := loadDemo(t)
	prompt := mult.Problem{A: 12, B: 19}.Prompt()
	if got := len(tok.Encode(prompt)); got >= 25 {
		t.Errorf("%q: %d tokens, want < 25", prompt, got)
	}
	if got := len(tok.Encode(prompt)); got != 12 {
		t.Errorf("%q: %d tokens, want 12", prompt, got)
	}
}

// The saved tokenizer_config.json's template renders through data/chat as Qwen2.5-Instruct's does,
// and the rendered demo conversation tokenizes with each special token once per place.
func TestSaved_ChatTemplate(t *testing.T) {
	dir, _ := demoDir(t)
	tok := loadDemo(t)
	tpl, err := chat.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	msgs := []chat.Message{{Role: "user", Content: mult.Problem{A: 3, B: 4}.Prompt()}, {Role: "assistant", Content: "12"}}
	got, err := tpl.Render(msgs, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" +
		"<|im_start|>user\n3×4는 얼마인가요? 숫자 하나로만 답하세요.<|im_end|>\n<|im_start|>assistant\n12<|im_end|>\n"
	if got != want {
		t.Fatalf("render:\ngot  %q\nwant %q", got, want)
	}
	ids := tok.Encode(got)
	special := chat.SpecialIDs(tok, Specials)
	if err := chat.CheckDoubledIDs(ids, special, nil); err != nil {
		t.Error(err)
	}
	var nStart, nEnd int
	for _, id := range ids {
		switch special[id] {
		case "<|im_start|>":
			nStart++
		case "<|im_end|>":
			nEnd++
		}
	}
	if nStart != 3 || nEnd != 3 {
		t.Errorf("got %d <|im_start|> and %d <|im_end|>, want 3 and 3", nStart, nEnd)
	}
	if tok.Decode(ids, false) != got {
		t.Errorf("rendered conversation does not round-trip")
	}
	if s := tok.Decode(ids, true); strings.Contains(s, "<|") {
		t.Errorf("Decode(skipSpecial) kept markup: %q", s)
	}
}

// ChatTemplate is the Qwen2.5-Instruct template that data/chat's tests render against HF's output.
func TestChatTemplate_IsQwen25(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "chat", "testdata", "qwen25_chat_template.jinja"))
	if err != nil {
		t.Skipf("data/chat's copy of the template is not here: %v", err)
	}
	if ChatTemplate != string(want) {
		t.Error("qwen25_chat_template.jinja differs from data/chat/testdata's copy")
	}
}

// Save writes the four files of HuggingFace's layout and leaves no temporary file behind; saving
// again over them gives the same bytes.
func TestSave_Files(t *testing.T) {
	dir, res := demoDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "merges.txt,tokenizer.json,tokenizer_config.json,vocab.json" {
		t.Errorf("files: %v", names)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err := res.Save(dir); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if !bytes.Equal(before, after) || !bytes.Contains(after, []byte(`"<|im_end|>"`)) {
		t.Error("saving again changed tokenizer.json, or it escapes < and >")
	}
	merges, _ := os.ReadFile(filepath.Join(dir, "merges.txt"))
	if lines := strings.Split(strings.TrimSuffix(string(merges), "\n"), "\n"); lines[0] != "#version: 0.2" || len(lines) != len(res.Merges)+1 {
		t.Errorf("merges.txt: %d lines, first %q", len(lines), lines[0])
	}
	var vocab map[string]int
	data, _ := os.ReadFile(filepath.Join(dir, "vocab.json"))
	if err := json.Unmarshal(data, &vocab); err != nil || len(vocab) != len(res.Tokens) {
		t.Errorf("vocab.json: %d entries (%v), want %d", len(vocab), err, len(res.Tokens))
	}
}
