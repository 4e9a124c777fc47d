package tokenizer

import (
	"os"
	"testing"
)

// maxFuzzTokenizer bounds a fuzzed tokenizer.json so that one iteration stays fast (building a
// BPE model is linear in the vocabulary and merges; the real Qwen file is 7 MB).
const maxFuzzTokenizer = 64 << 10

func fuzzSeedFile(f *testing.F, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}

// FuzzFromJSON checks that no tokenizer.json makes FromJSON panic, and that a tokenizer it
// accepts encodes and decodes text (fixed, and a piece of the input) without panicking, every id
// inside its vocabulary.
func FuzzFromJSON(f *testing.F) {
	fuzzSeedFile(f, "../../models/tinymodel/files/tokenizer.json")
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"use_regex":true},"decoder":{"type":"ByteLevel"}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]},"added_tokens":[{"id":3,"content":"<x>","special":true}]}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":-1},"merges":["a a a"]}}`))
	f.Add([]byte(`{"model":{"type":"WordPiece"},"normalizer":{"type":"NFKC"}}`))
	f.Add([]byte(`{"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"},"pre_tokenizer":{"type":"Split","pattern":{"String":" "},"behavior":"MergedWithPrevious","invert":false},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{"<s>":{"id":"<s>","ids":[1],"tokens":["<s>"]}}},"decoder":{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]},"model":{"type":"BPE","unk_token":"<unk>","fuse_unk":true,"byte_fallback":true,"vocab":{"<unk>":0,"<s>":1,"a":2,"▁":3,"<0x0A>":4,"<0xC3>":5,"<0xA9>":6,"▁a":7},"merges":[["▁","a"]]}}`))
	f.Add([]byte(`{"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":true},{"type":"ByteLevel","add_prefix_space":true,"use_regex":true}]},"decoder":{"type":"ByteLevel"},"model":{"type":"BPE","vocab":{},"merges":[]}}`))
	f.Add([]byte(`{"added_tokens":[{"id":0,"content":""}],"model":{"type":"BPE","vocab":{},"merges":[]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > maxFuzzTokenizer {
			return
		}
		tok, err := FromJSON(b, "tokenizer.json")
		if err != nil {
			if tok != nil {
				t.Fatalf("FromJSON returned a tokenizer with error %v", err)
			}
			return
		}
		text := "Hello, world! 12×13 = 156\n<|im_end|> " + string(b[:min(len(b), 64)])
		for _, ids := range [][]int{tok.Encode(text), tok.EncodePlain(text)} {
			for _, id := range ids {
				if _, ok := tok.IDToToken(id); !ok {
					t.Fatalf("Encode gave id %d, which is not a token (vocabulary %d)", id, tok.VocabSize())
				}
			}
			_ = tok.Decode(ids, true)
			_ = tok.Decode(ids, false)
		}
		_ = tok.Decode([]int{-1, 0, 1, tok.VocabSize(), 1 << 40}, false)
		_ = tok.SpecialIDs()
	})
}

// FuzzParseConfig checks that no tokenizer_config.json makes ParseConfig panic, and that an
// accepted one is checked against the Qwen3 tokenizer (Load's checkConfig) without panicking.
func FuzzParseConfig(f *testing.F) {
	fuzzSeedFile(f, "testdata/tokenizer_config.json")
	fuzzSeedFile(f, "../../models/tinymodel/files/tokenizer_config.json")
	fuzzSeedFile(f, "../chat/testdata/tokenizer_config.json")
	f.Add([]byte(`{"eos_token":{"content":"<|im_end|>","special":true},"pad_token":null,"model_max_length":1e30}`))
	f.Add([]byte(`{"added_tokens_decoder":{"x":{"content":"a"}},"chat_template":[{"name":"default","template":"{{ x }}"}]}`))
	f.Add([]byte(`{"added_tokens_decoder":{"-5":{"content":"<|endoftext|>"}},"model_max_length":-3.5,"bos_token":7}`))
	f.Add([]byte(`{"chat_template":[{"name":"tool_use"}],"additional_special_tokens":[1]}`))
	// Loaded before the inputs run: under the fuzzer's coverage instrumentation, loading the 151k-token
	// tokenizer inside the first input took more than the 10 s after which the coordinator calls a
	// worker hung ("fuzzing process hung or terminated unexpectedly") on a loaded 2-core machine.
	tok, _ := testTokenizer(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseConfig(b)
		if err != nil {
			return
		}
		if cfg.ModelMaxLength < 0 {
			t.Fatalf("accepted model_max_length %d", cfg.ModelMaxLength)
		}
		_ = tok.checkConfig(cfg)
	})
}
