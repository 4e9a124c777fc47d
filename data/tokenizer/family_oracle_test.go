//go:build oracle

package tokenizer

// HuggingFace tokenizers as the reference for the Llama 3 and Gemma 3 tokenizers (family_test.go):
//   UPDATE_GOLDEN=1 go test -tags oracle -run TestOracle_UpdateFamilies ./data/tokenizer/
// draws new golden inputs (with npm tokenizers' answers); make reference-tokenizers then
// recomputes every answer with the pinned Python tokenizers and transformers.
//   go test -tags oracle -run TestOracle_FamilyFuzz ./data/tokenizer/     # SEED=n for other inputs

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// familyExtras are the texts each family's golden file adds to Qwen's 415 (golden.json): its
// chat markup and near misses, digit groupings, whitespace kinds, and for Gemma its added tokens
// (newline and tab runs, HTML tags, "▁" runs) and characters missing from its vocabulary (byte
// fallback).
func familyExtras(name string) []familyCase {
	common := map[string][]string{
		"num": {"1", "12", "123", "1234", "12345", "123456", "1234567", "12345678901234567890", "3.14159", "1,234,567.89",
			"x1234y", "  1234", "٣٤٥٦٧", "①②③④⑤", "१२३४", "2024-12-01T15:04:05Z", "0x1F600", "1e-10", "-42", "v1.2.3 \U00011DE0\U00011DE9\U00016FF4\u2155"},
		"ws": {"", " ", "  ", "\t", "\t\t  \n \n\n", "\u3000\u3000x", "a\u00a0b", "line1\r\nline2\r\n", "   leading", "trailing   ",
			"\n\n\n\n\n", "x\u2028y\u2029z", "\u200b\u200d"},
		"misc": {"It's they're we've I'm you'll he'd", "IT'S THEY'RE", "don't  won't", "a\u0301 e\u0301 n\u0303", "Ǆ ǅ ǆ ß ẞ İ ı",
			"👩\u200d👩\u200d👧\u200d👦 🇯🇵 🏳️\u200d🌈", "\x01\x02\x7f\u0085", "\ue000\uf8ff\U0010FFFD", "𠀀𪚥𫠠𬺰", "\U0001FAE8\U0001FAE9",
			"▁", "▁▁▁", " ▁ x▁y", "<0x41><0xFF>", "<unk><mask>[multimodal]", "def f(x):\n\treturn x ** 2  # square\n",
			"SELECT * FROM t WHERE a = 'b';", "<table><tr><td>x</td></tr></table>", "<h1>Title</h1>\n<p>text</p>",
			"\t\tindented\n\t\t\tmore", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"},
	}
	chat := map[string][]string{
		"llama3": {
			"<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
			"<|begin_of_text|><|begin_of_text|>x", "<|eot_id|>\n<|eot_id|>", "<|eot_id", "<|start_header_id|>assistant", "<|reserved_special_token_5|>",
			"<|end_of_text|>", "<|python_tag|>print(1)<|eom_id|>", "<|finetune_right_pad_id|>", "< |eot_id| >", "<|EOT_ID|>",
		},
		"gemma3": {
			"<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\nHello.<end_of_turn>\n",
			"<bos><bos>x", "<end_of_turn>\n<end_of_turn>", "<start_of_turn", "<eos>", "<pad><pad>", "<unused0><unused6241>",
			"<start_of_image><image_soft_token><end_of_image>", "<mask>", "<START_OF_TURN>", "< bos >",
		},
	}
	var out []familyCase
	for _, cat := range []string{"num", "ws", "misc"} {
		for _, s := range common[cat] {
			out = append(out, familyCase{Cat: cat, Text: s})
		}
	}
	if name == "smollm2-pipeline" {
		name = "llama3" // the same vocabulary
	}
	for _, s := range chat[name] {
		out = append(out, familyCase{Cat: "chat", Text: s})
	}
	return out
}

// familyInputs returns random texts (fuzzInputs' texts with the family's markup spliced in at
// random places) and random id sequences over the family's vocabulary, special tokens and low
// ids (Gemma's <0xNN> byte tokens are ids 238-493, so sequences cut UTF-8 characters there).
func familyInputs(tok *BPE, name string, seed uint64, nTexts, nIDs int) ([]string, [][]int) {
	texts, _ := fuzzInputs(seed, nTexts, 0)
	rng := rand.New(rand.NewPCG(seed, 7))
	var frags []string
	for _, c := range familyExtras(name) {
		if c.Cat == "chat" || c.Cat == "misc" {
			frags = append(frags, c.Text)
		}
	}
	for i, s := range texts {
		for n := rng.IntN(4); n > 0; n-- {
			at := rng.IntN(len(s) + 1)
			for at < len(s) && !utf8.RuneStart(s[at]) {
				at++
			}
			s = s[:at] + frags[rng.IntN(len(frags))] + s[at:]
		}
		texts[i] = s
	}
	lowByte, _ := tok.TokenToID("<0x00>")
	specials := tok.SpecialIDs()
	idSeqs := make([][]int, nIDs)
	for i := range idSeqs {
		ids := make([]int, 1+rng.IntN(8))
		for k := range ids {
			switch rng.IntN(6) {
			case 0:
				ids[k] = rng.IntN(600)
			case 1:
				ids[k] = lowByte + rng.IntN(256) // Gemma: byte tokens; Llama: ordinary ids
			case 2:
				ids[k] = specials[rng.IntN(len(specials))]
			default:
				ids[k] = rng.IntN(tok.VocabSize())
			}
		}
		idSeqs[i] = ids
	}
	return texts, idSeqs
}

// oracleFile returns the tokenizer.json for oracle.js: the family's file, or a temporary copy
// with the overrides applied.
func oracleFile(t *testing.T, f family) string {
	if f.override == nil {
		return f.dir + "/tokenizer.json.gz"
	}
	data, err := f.tokenizerJSON()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tokenizer.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func overrideNote(f family) string {
	if f.override == nil {
		return ""
	}
	keys := make([]string, 0, len(f.override))
	for k := range f.override {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(", " + k + " = " + f.override[k])
	}
	return " with" + strings.TrimPrefix(b.String(), ",")
}

func oracleFamilyCases(t *testing.T, file string, cases []familyCase, idSeqs [][]int) ([]familyCase, []hfDecoded) {
	texts := make([]string, len(cases))
	for i, c := range cases {
		texts[i] = c.Text
	}
	lines := runOracleLines(t, file, texts, idSeqs)
	for i := range cases {
		if err := json.Unmarshal([]byte(lines[i]), &cases[i]); err != nil {
			t.Fatal(err)
		}
	}
	decs := make([]hfDecoded, len(idSeqs))
	for i := range decs {
		decs[i].IDs = idSeqs[i]
		if err := json.Unmarshal([]byte(lines[len(texts)+i]), &decs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return cases, decs
}

// TestOracle_UpdateFamilies rewrites testdata/<family>/golden.json.gz (read by family_test.go).
func TestOracle_UpdateFamilies(t *testing.T) {
	if os.Getenv("UPDATE_GOLDEN") == "" {
		t.Skip("set UPDATE_GOLDEN=1 to rewrite testdata/<family>/golden.json.gz")
	}
	_, qwenCases := testTokenizer(t)
	for _, f := range families {
		tok, err := f.load()
		if err != nil {
			t.Fatal(err)
		}
		file := oracleFile(t, f)
		var cases []familyCase
		for _, c := range qwenCases {
			cases = append(cases, familyCase{Cat: "qwen-" + c.Cat, Text: c.Text})
		}
		cases = append(cases, familyExtras(f.name)...)
		cases, _ = oracleFamilyCases(t, file, cases, nil)
		texts, idSeqs := familyInputs(tok, f.name, 0, 2000, 1500)
		fuzz := make([]familyCase, len(texts))
		for i, s := range texts {
			fuzz[i] = familyCase{Cat: "fuzz", Text: s}
		}
		fuzz, decs := oracleFamilyCases(t, file, fuzz, idSeqs)
		g := familyGolden{
			Meta: map[string]string{
				"generator": "UPDATE_GOLDEN=1 go test -tags oracle -run TestOracle_UpdateFamilies ./data/tokenizer/ (familyInputs seed 0)",
				"oracle":    "HuggingFace tokenizers (npm) 0.23.2 via testdata/oracle/oracle.js on " + f.dir + "/tokenizer.json.gz" + overrideNote(f),
				"cases":     strconv.Itoa(len(cases)) + " texts: golden.json's (cat qwen-*) and familyExtras",
			},
			Cases: cases, Fuzz: fuzz, Decode: decs,
		}
		writeGzipJSON(t, f.goldenPath(), g)
		t.Logf("%s: %d cases, %d fuzz texts, %d id sequences", f.name, len(cases), len(fuzz), len(decs))
	}
}

// TestOracle_FamilyFuzz compares each family with HuggingFace on fresh random inputs.
func TestOracle_FamilyFuzz(t *testing.T) {
	seed, _ := strconv.Atoi(os.Getenv("SEED"))
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tok, _ := loadFamily(t, f)
			texts, idSeqs := familyInputs(tok, f.name, uint64(seed)+1000, 20000, 10000)
			cases := make([]familyCase, len(texts))
			for i, s := range texts {
				cases[i] = familyCase{Cat: "fuzz", Text: s}
			}
			cases, decs := oracleFamilyCases(t, oracleFile(t, f), cases, idSeqs)
			checkFamilyCases(t, tok, cases)
			bad := 0
			for _, d := range decs {
				if got := tok.Decode(d.IDs, false); got != d.Decoded {
					if bad++; bad <= 10 {
						t.Errorf("Decode(%v) = %+q, want %+q", d.IDs, got, d.Decoded)
					}
				}
				if got := tok.Decode(d.IDs, true); got != d.DecodedSkip {
					if bad++; bad <= 10 {
						t.Errorf("Decode(%v, skip) = %+q, want %+q", d.IDs, got, d.DecodedSkip)
					}
				}
			}
		})
	}
}

// TestOracle_DigitsTable runs every code point of planes 0-3 and 14 through HuggingFace's Digits
// pre-tokenizer (the smollm2-pipeline family, Llama 3's vocabulary) between letters, and checks
// the ids: it measures which characters Rust's char::is_numeric holds that Go's tables lack.
func TestOracle_DigitsTable(t *testing.T) {
	f := families[2]
	tok, err := f.load()
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	var b strings.Builder
	for _, plane := range [][2]rune{{0, 0x3FFFF}, {0xE0000, 0xEFFFF}} {
		for r := plane[0]; r <= plane[1]; r++ {
			if r == 0 || r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			b.WriteString("x")
			b.WriteRune(r)
			if b.Len() > 4000 {
				texts = append(texts, b.String())
				b.Reset()
			}
		}
	}
	texts = append(texts, b.String())
	cases := make([]familyCase, len(texts))
	for i, s := range texts {
		cases[i] = familyCase{Cat: "digits", Text: s}
	}
	cases, _ = oracleFamilyCases(t, oracleFile(t, f), cases, nil)
	checkFamilyCases(t, tok, cases)
}

// TestOracle_Pipelines checks the pipeline pieces no family file uses (String Split behaviors,
// Digits runs, Prepend, Strip, ByteLevel's prefix space, unknown characters with and without
// fuse_unk and byte fallback) on small tokenizers against HuggingFace, on random text.
func TestOracle_Pipelines(t *testing.T) {
	charVocab := func(byteTokens bool) (map[string]int, [][2]string) {
		vocab := map[string]int{"<unk>": 0}
		for _, s := range []string{"a", "b", "c", "▁", "1", "2", "\n", "x", " ", "é"} {
			vocab[s] = len(vocab)
		}
		if byteTokens {
			for b := range 256 {
				if b >= 0x80 || b == '\t' { // not all bytes: "<0x41>" style tokens for the rest are absent
					vocab[fmt.Sprintf("<0x%02X>", b)] = len(vocab)
				}
			}
		}
		merges := [][2]string{{"a", "b"}, {"▁", "a"}, {"ab", "c"}, {"1", "2"}, {"▁a", "b"}, {"b", "▁"}}
		for _, m := range merges {
			vocab[m[0]+m[1]] = len(vocab)
		}
		return vocab, merges
	}
	charModel := func(byteFallback, fuse bool) map[string]any {
		vocab, merges := charVocab(byteFallback)
		return map[string]any{"type": "BPE", "dropout": nil, "unk_token": "<unk>", "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": fuse, "byte_fallback": byteFallback, "ignore_merges": false,
			"vocab": vocab, "merges": merges}
	}
	sp := func(behavior string) map[string]any {
		return map[string]any{"type": "Split", "pattern": map[string]any{"String": "▁"}, "behavior": behavior, "invert": false}
	}
	replace := map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}
	spDecoder := map[string]any{"type": "Sequence", "decoders": []any{
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
		map[string]any{"type": "ByteFallback"}, map[string]any{"type": "Fuse"},
		map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0}}}
	var configs []map[string]any
	for _, behavior := range []string{"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"} {
		for _, bf := range []bool{false, true} {
			configs = append(configs, map[string]any{
				"normalizer":    map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "Prepend", "prepend": "▁"}, replace}},
				"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{sp(behavior), map[string]any{"type": "Digits", "individual_digits": !bf}}},
				"decoder":       spDecoder,
				"model":         charModel(bf, behavior != "Isolated"),
			})
		}
	}
	llamaData, err := readMaybeGzip("testdata/llama3/tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	var llama map[string]any
	if err := json.Unmarshal(llamaData, &llama); err != nil {
		t.Fatal(err)
	}
	configs = append(configs, map[string]any{"normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true}, "model": llama["model"]})
	rng := rand.New(rand.NewPCG(5, 5))
	alphabet := []string{"a", "b", "c", " ", " ", "▁", "1", "2", "3", "\n", "x", "é", "😀", "\t", "A", "<s>", "ab ", "12345"}
	texts := make([]string, 3000)
	for i := range texts {
		var b strings.Builder
		for n := rng.IntN(14); n >= 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts[i] = b.String()
	}
	for k, cfg := range configs {
		doc := map[string]any{"version": "1.0", "truncation": nil, "padding": nil, "added_tokens": []AddedToken{}, "post_processor": nil}
		if k < len(configs)-1 {
			n := len(cfg["model"].(map[string]any)["vocab"].(map[string]int))
			doc["added_tokens"] = []AddedToken{{ID: n, Content: "<s>", Special: true}, {ID: n + 1, Content: "ab▁", Normalized: true}}
		}
		for key, v := range cfg {
			doc[key] = v
		}
		data, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := FromJSON(data, "pipeline.json")
		if err != nil {
			t.Fatalf("config %d: %v", k, err)
		}
		file := filepath.Join(t.TempDir(), "tokenizer.json")
		if err := os.WriteFile(file, data, 0o644); err != nil {
			t.Fatal(err)
		}
		cases := make([]familyCase, len(texts))
		for i, s := range texts {
			cases[i] = familyCase{Cat: "pipeline", Text: s}
		}
		cases, _ = oracleFamilyCases(t, file, cases, nil)
		t.Run(fmt.Sprint(k), func(t *testing.T) { checkFamilyCases(t, tok, cases) })
	}
}
