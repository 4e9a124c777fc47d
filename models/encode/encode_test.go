package encode_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/tinymodel"
)

// checkpoint writes the tiny test checkpoint (Qwen's tokenizer cut down, ChatML, eos_token
// <|im_end|>, no bos_token) with edit applied to its tokenizer_config.json.
func checkpoint(t *testing.T, edit func(map[string]any)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := tinymodel.Write(dir, tinymodel.Options{}); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		path := filepath.Join(dir, "tokenizer_config.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg := map[string]any{}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		if raw, err = json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func load(t *testing.T, dir string) *encode.Text {
	t.Helper()
	txt, err := encode.Load(dir, encode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return txt
}

// A base model (no chat_template) loads without a template where one is optional and fails where
// it is required; a broken template fails unless it is not read; a tokenizer larger than the
// model's vocabulary fails.
func TestLoad_TemplateModes(t *testing.T) {
	instruct := checkpoint(t, nil)
	base := checkpoint(t, func(c map[string]any) { delete(c, "chat_template") })
	broken := checkpoint(t, func(c map[string]any) { c["chat_template"] = "{% for %}" })
	for _, tc := range []struct {
		name, dir    string
		mode         encode.TemplateMode
		wantTemplate bool
		wantErr      bool
	}{
		{"instruct, if any", instruct, encode.TemplateIfAny, true, false},
		{"instruct, required", instruct, encode.TemplateRequired, true, false},
		{"instruct, none", instruct, encode.NoTemplate, false, false},
		{"base, if any", base, encode.TemplateIfAny, false, false},
		{"base, required", base, encode.TemplateRequired, false, true},
		{"base, none", base, encode.NoTemplate, false, false},
		{"broken, if any", broken, encode.TemplateIfAny, false, true},
		{"broken, none", broken, encode.NoTemplate, false, false},
	} {
		txt, err := encode.Load(tc.dir, encode.Options{Template: tc.mode})
		if (err != nil) != tc.wantErr || (err == nil && (txt.Template != nil) != tc.wantTemplate) {
			t.Errorf("%s: text %+v, err %v; want template %v, error %v", tc.name, txt, err, tc.wantTemplate, tc.wantErr)
		}
	}
	_, err := encode.Load(instruct, encode.Options{VocabSize: tinymodel.VocabSize - 1})
	if err == nil || !strings.Contains(err.Error(), "vocab_size") {
		t.Errorf("tokenizer larger than vocab_size: err %v", err)
	}
	if _, err := encode.Load(instruct, encode.Options{VocabSize: tinymodel.VocabSize}); err != nil {
		t.Errorf("tokenizer of vocab_size: %v", err)
	}
}

// StopIDs: config.json's eos_token_id, then generation_config.json's, then the tokenizer's
// eos_token, without duplicates; none at all is an error.
func TestStopIDs(t *testing.T) {
	cfg := tinymodel.Options{}.Config() // eos_token_id <|im_end|>; generation_config adds <|endoftext|>
	for _, tc := range []struct {
		name string
		eos  any
		want []int
	}{
		{"eos_token among the model's", "<|im_end|>", []int{tinymodel.IMEnd, tinymodel.EndOfText}},
		{"eos_token of its own", "<|im_start|>", []int{tinymodel.IMEnd, tinymodel.EndOfText, tinymodel.IMStart}},
		{"no eos_token", nil, []int{tinymodel.IMEnd, tinymodel.EndOfText}},
	} {
		txt := load(t, checkpoint(t, func(c map[string]any) { c["eos_token"] = tc.eos }))
		if got, err := txt.StopIDs(cfg); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s: StopIDs = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
	dir := checkpoint(t, func(c map[string]any) { c["eos_token"] = nil })
	if err := os.Remove(filepath.Join(dir, "generation_config.json")); err != nil {
		t.Fatal(err)
	}
	none := *cfg
	none.EOSTokenIDs = nil
	if got, err := load(t, dir).StopIDs(&none); err == nil || !strings.Contains(err.Error(), "no end-of-sequence id") {
		t.Errorf("no eos ids anywhere: StopIDs = %v, %v; want an error", got, err)
	}
}

// Prompts: conversational prompts rendered with add_generation_prompt, standard ones as they are,
// ids the tokenizer's, columns kept; an empty prompt or a conversation without a template fails.
func TestPrompts(t *testing.T) {
	txt := load(t, checkpoint(t, nil))
	rows := []data.Row{
		{Prompt: data.Text{Messages: []chat.Message{{Role: "user", Content: "2×3?"}}}, Columns: map[string]any{"answer": "6"}},
		{Prompt: data.Text{String: "2×3="}},
	}
	got, err := txt.Prompts(rows)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"<|im_start|>user\n2×3?<|im_end|>\n<|im_start|>assistant\n", "2×3="} {
		ids := txt.Tokenizer.Encode(want)
		if got[i].Text != want || len(got[i].IDs) != len(ids) || int(got[i].IDs[len(ids)-1]) != ids[len(ids)-1] {
			t.Errorf("prompt %d: %q %v, want %q %v", i, got[i].Text, got[i].IDs, want, ids)
		}
	}
	if got[0].Columns["answer"] != "6" {
		t.Errorf("columns %v, want the row's", got[0].Columns)
	}
	if _, err := txt.Prompts([]data.Row{rows[1], {Prompt: data.Text{String: ""}}}); err == nil || err.Error() != "row 2: the prompt is empty" {
		t.Errorf("empty prompt: err %v", err)
	}
	base, err := encode.Load(checkpoint(t, func(c map[string]any) { delete(c, "chat_template") }), encode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := base.Prompts(rows[:1]); err == nil || !strings.Contains(err.Error(), "need a chat template") {
		t.Errorf("conversation without a template: err %v", err)
	}
}

// cutRecorder is a Truncation that records what EncodePair hands it and cuts as told.
type cutRecorder struct {
	prompt, completion []int
	bos, eos           int
	cut                func(p, c []int) ([]int, []int)
}

func (r *cutRecorder) truncation(eosAfterCut bool) encode.Truncation {
	return encode.Truncation{Lengths: encode.Lengths{Max: 7}, EOSAfterCut: eosAfterCut, Cut: func(p, c []int, bos, eos int) ([]int, []int) {
		r.prompt, r.completion, r.bos, r.eos = p, c, bos, eos
		if r.cut != nil {
			return r.cut(p, c)
		}
		return p, c
	}}
}

// EncodePair hands the truncation the prompt's and the completion's ids (the EOS text appended
// before tokenizing, or left to the cut with its id), the BOS and EOS ids, and turns what the cut
// leaves into ids with the completion's start, or an error naming the limits when nothing is
// left to train on.
func TestEncodePair_Truncation(t *testing.T) {
	txt := load(t, checkpoint(t, nil))
	prompt, completion := "2×3=", "6"
	p, c := txt.Tokenizer.Encode(prompt), txt.Tokenizer.Encode(completion)
	eosText := append(slices.Clone(c), tinymodel.IMEnd)
	for _, tc := range []struct {
		name         string
		completion   string
		addEOS, late bool
		wantC        []int
		wantEOS      int
	}{
		{"EOS as text", completion, true, false, eosText, tinymodel.IMEnd},
		{"EOS already there", completion + "<|im_end|>", true, false, eosText, tinymodel.IMEnd},
		{"EOS after the cut", completion, true, true, c, tinymodel.IMEnd},
		{"no EOS", completion, false, false, c, -1},
	} {
		var r cutRecorder
		got, err := txt.EncodePair(prompt, tc.completion, tc.addEOS, r.truncation(tc.late))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(r.prompt, p) || !slices.Equal(r.completion, tc.wantC) || r.bos != -1 || r.eos != tc.wantEOS {
			t.Errorf("%s: cut got %v | %v (bos %d, eos %d), want %v | %v (bos -1, eos %d)", tc.name, r.prompt, r.completion, r.bos, r.eos, p, tc.wantC, tc.wantEOS)
		}
		if got.Start != len(p) || got.Completion() != len(tc.wantC) || int(got.IDs[len(p)]) != tc.wantC[0] {
			t.Errorf("%s: encoded %v start %d", tc.name, got.IDs, got.Start)
		}
	}
	for _, tc := range []struct {
		name, want string
		cut        func(p, c []int) ([]int, []int)
	}{
		{"completion cut away", "cut away entirely by truncation (max_prompt_length 0, max_completion_length 0, max_length 7, truncation_mode keep_end)",
			func(p, _ []int) ([]int, []int) { return p, nil }},
		{"one token, no prompt", "leaves one completion token and no prompt", func(_, c []int) ([]int, []int) { return nil, c[:1] }},
	} {
		r := cutRecorder{cut: tc.cut}
		if _, err := txt.EncodePair(prompt, completion, true, r.truncation(false)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := txt.EncodePair(prompt, "6<|im_end|>\n<|im_end|>", true, encode.Truncation{}); err == nil || !strings.Contains(err.Error(), "doubled special token") {
		t.Errorf("doubled EOS: err %v", err)
	}
	if _, err := txt.EncodePair(prompt, "", false, encode.Truncation{}); err == nil || err.Error() != "empty completion" {
		t.Errorf("empty completion: err %v", err)
	}
}

// EncodeJoined tokenizes the prompt and prompt+completion+EOS together (SFT); EncodeText a text
// with its EOS; a prompt whose last token merges into the completion's fails.
func TestEncodeJoinedAndText(t *testing.T) {
	txt := load(t, checkpoint(t, nil))
	ids, start, err := txt.EncodeJoined("2×3=", "6", true)
	if want := txt.Tokenizer.Encode("2×3=6<|im_end|>"); err != nil || !slices.Equal(ids, want) || start != len(txt.Tokenizer.Encode("2×3=")) {
		t.Errorf("EncodeJoined = %v start %d (err %v), want %v start %d", ids, start, err, want, len(txt.Tokenizer.Encode("2×3=")))
	}
	if _, _, err := txt.EncodeJoined("x ", "y", false); err == nil || !strings.Contains(err.Error(), "not a prefix") {
		t.Errorf("token across the boundary: err %v", err)
	}
	if _, _, err := txt.EncodeJoined("x", "", false); err == nil || err.Error() != "empty completion" {
		t.Errorf("empty completion: err %v", err)
	}
	for _, tc := range []struct {
		text   string
		addEOS bool
		want   string
	}{{"2×3=6", true, "2×3=6<|im_end|>"}, {"2×3=6<|im_end|>", true, "2×3=6<|im_end|>"}, {"2×3=6", false, "2×3=6"}} {
		if got, err := txt.EncodeText(tc.text, tc.addEOS); err != nil || !slices.Equal(got, txt.Tokenizer.Encode(tc.want)) {
			t.Errorf("EncodeText(%q, %v) = %v, %v; want the ids of %q", tc.text, tc.addEOS, got, err, tc.want)
		}
	}
}

// SetEOSToken replaces the EOS (EOS, the template's eos_token, what SaveChanges writes) but not
// the model's eos ids; SetChatTemplate with a tokenizer directory (clone_chat_template) also sets
// them (ConfigEOS), with a template file it does not.
func TestSetEOSTokenAndChatTemplate(t *testing.T) {
	dir := checkpoint(t, nil)
	txt := load(t, dir)
	if err := txt.SetEOSToken("<|nope|>"); err == nil || !strings.Contains(err.Error(), "not in the vocabulary") {
		t.Errorf("unknown eos_token: err %v", err)
	}
	if err := txt.SetEOSToken("<|endoftext|>"); err != nil {
		t.Fatal(err)
	}
	if eos, id, err := txt.EOS(); err != nil || eos != "<|endoftext|>" || id != tinymodel.EndOfText || txt.Template.Special["eos_token"] != eos {
		t.Errorf("EOS = %q %d %v, template eos_token %q", eos, id, err, txt.Template.Special["eos_token"])
	}
	if _, ok := txt.ConfigEOS(); ok {
		t.Error("eos_token must leave config.json's eos_token_id")
	}
	out := t.TempDir()
	if err := txt.SaveChanges(out); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(out, "tokenizer_config.json"))
	if err != nil || !strings.Contains(string(raw), `"eos_token": "<|endoftext|>"`) {
		t.Errorf("saved tokenizer_config.json %s (err %v), want eos_token <|endoftext|>", raw, err)
	}

	jinja := filepath.Join(t.TempDir(), "t.jinja")
	if err := os.WriteFile(jinja, []byte(tinymodel.ChatTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	base := load(t, checkpoint(t, func(c map[string]any) { delete(c, "chat_template"); c["eos_token"] = "<|endoftext|>" }))
	if err := base.SetChatTemplate(jinja); err != nil {
		t.Fatal(err)
	}
	if _, ok := base.ConfigEOS(); ok || base.Template == nil {
		t.Errorf("template file: template %v, ConfigEOS set; want a template and the model's ids", base.Template)
	}
	if err := base.SetChatTemplate(dir); err != nil {
		t.Fatal(err)
	}
	if id, ok := base.ConfigEOS(); !ok || id != tinymodel.IMEnd {
		t.Errorf("cloned directory: ConfigEOS = %d %v, want <|im_end|> %d", id, ok, tinymodel.IMEnd)
	}
	if eos, _, _ := base.EOS(); eos != "<|im_end|>" {
		t.Errorf("cloned directory: EOS %q, want its eos_token <|im_end|>", eos)
	}
}

// SetPadToken makes the resolved pad token the saved tokenizer's pad_token when it changes it, as
// TRL's RewardTrainer sets processing_class.pad_token_id: an explicit token, and the eos_token of a
// tokenizer without one; a tokenizer keeping its own pad_token is not rewritten.
func TestSetPadToken(t *testing.T) {
	saved := func(txt *encode.Text) (map[string]any, bool) {
		t.Helper()
		out := t.TempDir()
		src, err := os.ReadFile(filepath.Join(txt.Dir, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, "tokenizer_config.json"), src, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := txt.SaveChanges(out); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(out, "tokenizer_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		cfg := map[string]any{}
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		return cfg, !bytes.Equal(raw, src)
	}
	txt := load(t, checkpoint(t, nil)) // pad_token <|endoftext|>
	if id, err := txt.SetPadToken(""); err != nil || id != tinymodel.EndOfText {
		t.Fatalf("SetPadToken(\"\") = %d, %v; want the tokenizer's pad %d", id, err, tinymodel.EndOfText)
	}
	if _, changed := saved(txt); changed {
		t.Error("the tokenizer's own pad_token rewrote tokenizer_config.json")
	}
	if _, err := txt.SetPadToken("<|nope|>"); err == nil || !strings.Contains(err.Error(), `"<|nope|>"`) {
		t.Errorf("unknown pad token: err %v", err)
	}
	id, err := txt.SetPadToken("<|im_end|>")
	if want, _ := txt.Tokenizer.TokenToID("<|im_end|>"); err != nil || id != want {
		t.Fatalf("SetPadToken(<|im_end|>) = %d, %v; want %d", id, err, want)
	}
	if cfg, _ := saved(txt); cfg["pad_token"] != "<|im_end|>" || cfg["eos_token"] != "<|im_end|>" {
		t.Errorf("saved pad_token %v eos_token %v, want <|im_end|> for both", cfg["pad_token"], cfg["eos_token"])
	}
	nopad := load(t, checkpoint(t, func(c map[string]any) { delete(c, "pad_token") }))
	if id, err := nopad.SetPadToken(""); err != nil || id == tinymodel.EndOfText {
		t.Fatalf("no pad_token: SetPadToken = %d, %v; want the eos_token's id", id, err)
	}
	if cfg, _ := saved(nopad); cfg["pad_token"] != "<|im_end|>" {
		t.Errorf("no pad_token: saved pad_token %v, want the eos_token <|im_end|>", cfg["pad_token"])
	}
}
