package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// tinyJSON builds a small valid tokenizer.json: the 256 ByteLevel symbols (id = byte), the merges
// h+e, l+l, he+ll, Ġ+w (ids 256-259), and the given added tokens. edit may change the document.
func tinyJSON(t *testing.T, added []AddedToken, edit func(doc map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := range 256 {
		vocab[string(byteToRune[b])] = b
	}
	merges := [][2]string{{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"Ġ", "w"}}
	for i, m := range merges {
		vocab[m[0]+m[1]] = 256 + i
	}
	if added == nil {
		added = []AddedToken{}
	}
	byteLevel := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": added,
		"normalizer": map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenPattern}, "behavior": "Isolated", "invert": false},
			byteLevel,
		}},
		"post_processor": byteLevel, "decoder": byteLevel,
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges},
	}
	if edit != nil {
		edit(doc)
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func modelOf(doc map[string]any) map[string]any { return doc["model"].(map[string]any) }

// A byte without a token is dropped, as HuggingFace's BPE::merge_word does without an unk_token
// (tokenizers 0.22.1 encodes the same tokenizer.json to the same ids); SmolLM2's vocabulary has no
// token for 21 bytes.
func TestFromJSON_MissingByteIsDropped(t *testing.T) {
	tok, err := FromJSON(tinyJSON(t, nil, func(doc map[string]any) { delete(modelOf(doc)["vocab"].(map[string]int), "d") }), "nod.json")
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string][]int{"hello world": {258, 'o', 259, 'o', 'r', 'l'}, "d": {}, "odd": {'o'}} {
		if got := tok.Encode(text); !slices.Equal(got, want) {
			t.Errorf("Encode(%q) = %v, want %v", text, got, want)
		}
	}
}

// A tokenizer.json with truncation and padding set (as transformers saves one that TRL's trainers
// used) encodes as the same file without them: transformers applies neither unless a call asks.
func TestFromJSON_TruncationAndPaddingAreNotApplied(t *testing.T) {
	plain, err := FromJSON(tinyJSON(t, nil, nil), "plain.json")
	if err != nil {
		t.Fatal(err)
	}
	set, err := FromJSON(tinyJSON(t, nil, func(d map[string]any) {
		d["truncation"] = map[string]any{"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0}
		d["padding"] = map[string]any{"strategy": map[string]any{"Fixed": 16}, "direction": "Left", "pad_to_multiple_of": nil,
			"pad_id": 0, "pad_type_id": 0, "pad_token": "a"}
	}), "trl-saved.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"hello world", "hello world hello world", ""} {
		if a, b := plain.Encode(text), set.Encode(text); !slices.Equal(a, b) {
			t.Errorf("Encode(%q) = %v with truncation/padding, %v without", text, b, a)
		}
	}
}

func TestFromJSON_MergeFormats(t *testing.T) {
	pairs, err := FromJSON(tinyJSON(t, nil, nil), "pairs.json")
	if err != nil {
		t.Fatal(err)
	}
	strs, err := FromJSON(tinyJSON(t, nil, func(doc map[string]any) {
		modelOf(doc)["merges"] = []string{"h e", "l l", "he ll", "Ġ w"}
	}), "strings.json")
	if err != nil {
		t.Fatal(err)
	}
	want := []int{258, 'o', 259, 'o', 'r', 'l', 'd'} // "hell" "o" "Ġw" "o" "r" "l" "d"
	for _, tok := range []*BPE{pairs, strs} {
		if got := tok.Encode("hello world"); !slices.Equal(got, want) {
			t.Errorf("Encode = %v, want %v", got, want)
		}
	}
}

// A malformed tokenizer.json gives one line naming the file and the field.
func TestFromJSON_Errors(t *testing.T) {
	tests := []struct {
		name  string
		added []AddedToken
		edit  func(doc map[string]any)
		want  string
	}{
		{"not json", nil, nil, "bad.json: "},
		{"model type", nil, func(d map[string]any) { modelOf(d)["type"] = "WordPiece" }, `model.type: "WordPiece"`},
		{"merge not in vocab", nil, func(d map[string]any) { modelOf(d)["merges"] = []string{"h e", "x yz"} }, "model.merges[1]"},
		{"merge without space", nil, func(d map[string]any) { modelOf(d)["merges"] = []string{"he"} }, "model.merges[0]"},
		{"merges wrong type", nil, func(d map[string]any) { modelOf(d)["merges"] = 7 }, "model.merges"},
		{"dropout", nil, func(d map[string]any) { modelOf(d)["dropout"] = 0.1 }, "model.dropout"},
		{"regex", nil, func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\s+`}
		}, `pre_tokenizer: pretokenizers[0].pattern: regex "\\s+" is not supported`},
		{"lookahead", nil, func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\p{L}+|\s+(?!\S)|\s+`}
		}, `is not supported: its lookaround (?!...) has no Go regexp equivalent`},
		{"normalizer", nil, func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFKC"} }, `normalizer: type "NFKC"`},
		{"decoder", nil, func(d map[string]any) { d["decoder"] = nil }, "decoder: missing"},
		{"decoder type", nil, func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder: type "WordPiece" is not supported`},
		{"metaspace", nil, func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": true}
		}, `pre_tokenizer: type "Metaspace" is not supported`},
		{"split behavior", nil, func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["behavior"] = "Removed"
		}, "pre_tokenizer: pretokenizers[0]: Split with a Regex pattern supports behavior Isolated only"},
		{"split invert", nil, func(d map[string]any) {
			d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["invert"] = true
		}, "pre_tokenizer: pretokenizers[0]: Split with invert true is not supported"},
		{"replace regex", nil, func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"},
				map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": " +"}, "content": " "}}}
		}, "normalizer: normalizers[1]: Replace with a Regex pattern is not supported"},
		{"post processor", nil, func(d map[string]any) { d["post_processor"] = map[string]any{"type": "RobertaProcessing"} }, `post_processor: type "RobertaProcessing" is not supported`},
		{"template token", nil, func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": []any{
				map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
				"special_tokens": map[string]any{}}
		}, `post_processor: single[0]: special token "<s>" is not in special_tokens`},
		{"byte fallback", nil, func(d map[string]any) { modelOf(d)["byte_fallback"] = true }, "model.byte_fallback: must be false for a ByteLevel tokenizer"},
		{"truncation", nil, func(d map[string]any) { d["truncation"] = "yes" }, "truncation: want null or an object"},
		{"added id", []AddedToken{{ID: 300, Content: "<x>"}}, nil, `added_tokens[0]: "<x>" has id 300 but HuggingFace would give it 260`},
		{"added empty", []AddedToken{{ID: 260}}, nil, "added_tokens[0]: empty content"},
	}
	for _, tt := range tests {
		data := tinyJSON(t, tt.added, tt.edit)
		if tt.name == "not json" {
			data = data[:len(data)/2]
		}
		_, err := FromJSON(data, "bad.json")
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "bad.json: ") || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line starting with the file and containing %q", tt.name, msg, tt.want)
		}
	}
}

func TestLoad_Config(t *testing.T) {
	tok, _ := testTokenizer(t)
	cfg := tok.Config()
	if cfg.EOSToken != "<|im_end|>" || cfg.PadToken != "<|endoftext|>" || cfg.BOSToken != "" {
		t.Errorf("eos, pad, bos = %q, %q, %q", cfg.EOSToken, cfg.PadToken, cfg.BOSToken)
	}
	if !strings.HasPrefix(cfg.ChatTemplate, "{%- if tools %}") || len(cfg.ChatTemplate) < 1000 {
		t.Errorf("ChatTemplate = %.40q... (%d bytes)", cfg.ChatTemplate, len(cfg.ChatTemplate))
	}
	if len(cfg.AddedTokensDecoder) != 26 || cfg.AddedTokensDecoder[151645].Content != "<|im_end|>" || cfg.ModelMaxLength != 131072 {
		t.Errorf("added_tokens_decoder has %d entries, [151645] = %+v, model_max_length %d", len(cfg.AddedTokensDecoder), cfg.AddedTokensDecoder[151645], cfg.ModelMaxLength)
	}
	if id, ok := tok.TokenToID(cfg.EOSToken); !ok || id != 151645 {
		t.Errorf("TokenToID(eos) = %d, %v", id, ok)
	}
	if got, want := tok.VocabSize(), 151669; got != want {
		t.Errorf("VocabSize = %d, want %d", got, want)
	}
	if got := tok.SpecialIDs(); len(got) != 14 || got[0] != 151643 || got[13] != 151656 {
		t.Errorf("SpecialIDs = %v, want 151643..151656", got)
	}
}

// A model directory: tokenizer.json plus tokenizer_config.json and chat_template.jinja.
func TestLoad_Dir(t *testing.T) {
	dir := t.TempDir()
	added := []AddedToken{{ID: 260, Content: "<|end|>", Special: true}}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("tokenizer.json", string(tinyJSON(t, added, nil)))
	write("tokenizer_config.json", `{"eos_token": {"content": "<|end|>", "__type": "AddedToken"}, "bos_token": null,
		"model_max_length": 1e30, "added_tokens_decoder": {"260": {"content": "<|end|>", "special": true}}}`)
	write("chat_template.jinja", "{{ messages }}")
	tok, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := tok.Config(); cfg.EOSToken != "<|end|>" || cfg.ChatTemplate != "{{ messages }}" || cfg.ModelMaxLength != 0 {
		t.Errorf("config = %+v", cfg)
	}
	write("tokenizer_config.json", `{"eos_token": "<|eos|>"}`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), `eos_token "<|eos|>" is not a token`) {
		t.Errorf("Load with an unknown eos_token: err = %v", err)
	}
	write("tokenizer_config.json", `{"added_tokens_decoder": {"261": {"content": "<|end|>", "special": true}}}`)
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "added_tokens_decoder[261]") {
		t.Errorf("Load with a shifted added_tokens_decoder: err = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("Load(missing) err = %v", err)
	}
}
