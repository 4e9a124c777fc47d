package chat_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/tokenizer"
)

// The chat templates of Llama 3.1 and Gemma 3 (their tokenizer_config.json, copied into
// data/tokenizer/testdata/<family>/) render byte-identically to transformers'
// apply_chat_template, and the rendered text encodes to its tokenize=True ids
// (testdata/hf_families.json, written by scripts/reference/tokenizer_goldens.py; @huggingface/jinja
// gives the same texts, testdata/gen_families.js), and the rendered conversations tokenize with
// exactly one BOS: both templates write bos_token themselves.

type familyRender struct {
	Family              string  `json:"family"`
	Name                string  `json:"name"`
	AddGenerationPrompt bool    `json:"add_generation_prompt"`
	Rendered            *string `json:"rendered"`
	IDs                 []int   `json:"ids"` // apply_chat_template(tokenize=True)
	Error               *string `json:"error"`
}

func readFamilyConvs(t *testing.T) (map[string][]chat.Message, []familyRender) {
	t.Helper()
	var convs []struct {
		Name     string         `json:"name"`
		Messages []chat.Message `json:"messages"`
	}
	var golden []familyRender
	for file, dst := range map[string]any{"testdata/convs_families.json": &convs, "testdata/hf_families.json": &golden} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, dst); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	byName := map[string][]chat.Message{}
	for _, c := range convs {
		byName[c.Name] = c.Messages
	}
	return byName, golden
}

func TestRender_FamiliesMatchHFJinja(t *testing.T) {
	convs, golden := readFamilyConvs(t)
	if len(golden) != 28 {
		t.Fatalf("hf_families.json: %d renderings, want 28", len(golden))
	}
	tpls := map[string]*chat.Template{}
	toks := map[string]*tokenizer.BPE{}
	for _, g := range golden {
		tpl := tpls[g.Family]
		if tpl == nil {
			var err error
			if tpl, err = chat.Load("../tokenizer/testdata/" + g.Family); err != nil {
				t.Fatal(err)
			}
			tpls[g.Family] = tpl
		}
		got, err := tpl.Render(convs[g.Name], chat.Options{AddGenerationPrompt: g.AddGenerationPrompt})
		switch {
		case g.Error != nil:
			var te *chat.TemplateError
			if err == nil || !strings.Contains(err.Error(), *g.Error) || !errorsAs(err, &te) {
				t.Errorf("%s %s: err %v, want the template's error %q", g.Family, g.Name, err, *g.Error)
			}
		case err != nil:
			t.Errorf("%s %s (generation prompt %v): %v", g.Family, g.Name, g.AddGenerationPrompt, err)
		case got != *g.Rendered:
			t.Errorf("%s %s (generation prompt %v):\n got %q\nwant %q", g.Family, g.Name, g.AddGenerationPrompt, got, *g.Rendered)
		default:
			tok := toks[g.Family]
			if tok == nil {
				var err error
				if tok, err = tokenizer.Load("../tokenizer/testdata/" + g.Family); err != nil {
					t.Fatal(err)
				}
				toks[g.Family] = tok
			}
			if ids := tok.Encode(got); !slices.Equal(ids, g.IDs) || len(g.IDs) == 0 {
				t.Errorf("%s %s (generation prompt %v): ids\n got %v\nwant %v", g.Family, g.Name, g.AddGenerationPrompt, ids, g.IDs)
			}
		}
	}
}

func errorsAs(err error, te **chat.TemplateError) bool {
	for e := err; e != nil; {
		if x, ok := e.(*chat.TemplateError); ok {
			*te = x
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}

// Tokenizing a rendered conversation gives one BOS, at position 0 (the template's), and masks the
// assistant turns up to their end-of-turn token; adding the post-processor's BOS on top
// (EncodeSpecial, what add_special_tokens=True would do) doubles it, and CheckDoubledIDs says so.
func TestTokenize_FamiliesOneBOS(t *testing.T) {
	convs, _ := readFamilyConvs(t)
	for _, tc := range []struct{ family, bos, eot string }{
		{"llama3", "<|begin_of_text|>", "<|eot_id|>"},
		{"gemma3", "<bos>", "<end_of_turn>"},
	} {
		dir := "../tokenizer/testdata/" + tc.family
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := chat.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		bos, _ := tok.TokenToID(tc.bos)
		eot, _ := tok.TokenToID(tc.eot)
		if got := tpl.EndOfTurn(); got != tc.eot {
			t.Errorf("%s: EndOfTurn %q, want %q", tc.family, got, tc.eot)
		}
		if !slices.Contains(tpl.SpecialStrings(), tc.bos) {
			t.Errorf("%s: SpecialStrings %q lacks the BOS", tc.family, tpl.SpecialStrings())
		}
		special := chat.SpecialIDs(tok, tpl.SpecialStrings())
		n := 0
		for name, msgs := range convs {
			if name == "roles_not_alternating" || msgs[len(msgs)-1].Role != "assistant" {
				continue
			}
			n++
			got, err := tpl.Tokenize(tok, msgs, chat.Options{})
			if err != nil {
				t.Fatalf("%s %s: %v", tc.family, name, err)
			}
			if got.IDs[0] != bos || slices.Contains(got.IDs[1:], bos) {
				t.Errorf("%s %s: want one BOS %d at position 0, got %v", tc.family, name, bos, got.IDs[:min(4, len(got.IDs))])
			}
			if err := chat.CheckDoubledIDs(got.IDs, special, nil); err != nil {
				t.Errorf("%s %s: %v", tc.family, name, err)
			}
			var masked []int
			var want strings.Builder
			for j, m := range got.Mask {
				if m {
					masked = append(masked, got.IDs[j])
				}
			}
			for _, s := range got.Spans {
				want.WriteString(got.Text[s.Start:s.End])
			}
			if dec := tok.Decode(masked, false); dec != want.String() || masked[len(masked)-1] != eot {
				t.Errorf("%s %s: masked tokens decode to %q, want %q ending %s", tc.family, name, dec, want.String(), tc.eot)
			}
			// TRL #1591: the tokenizer's BOS on top of the template's.
			doubled := tok.EncodeSpecial(got.Text)
			if err := chat.CheckDoubledIDs(doubled, special, nil); err == nil || !strings.Contains(err.Error(), tc.bos) {
				t.Errorf("%s %s: BOS added twice (%v...) not caught: %v", tc.family, name, doubled[:2], err)
			}
		}
		if n < 3 {
			t.Errorf("%s: only %d conversations checked", tc.family, n)
		}
	}
}
