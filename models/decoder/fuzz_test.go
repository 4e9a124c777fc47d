package decoder

import (
	"os"
	"path/filepath"
	"testing"
)

const fuzzFixtureDir = "../testdata/qwen2-tiny"

func fuzzSeed(f *testing.F, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
}

// FuzzParseConfig checks that no config.json makes ParseConfig panic and that an accepted one
// passes Validate and lists its weights (the work Load does before reading them).
func FuzzParseConfig(f *testing.F) {
	fuzzSeed(f, filepath.Join(fuzzFixtureDir, "model", "config.json"))
	for _, family := range []string{"qwen3-tiny", "llama-tiny", "smollm2-tiny", "smollm3-tiny"} {
		fuzzSeed(f, filepath.Join("..", "testdata", family, "model", "config.json"))
	}
	f.Add([]byte(`{"model_type":"qwen2","vocab_size":8,"hidden_size":4,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"num_key_value_heads":1,"eos_token_id":[1,2],"bos_token_id":null}`))
	f.Add([]byte(`{"model_type":"qwen2","vocab_size":8,"hidden_size":4,"num_attention_heads":0,"rope_parameters":{"rope_type":"default","rope_theta":1e6}}`))
	f.Add([]byte(`{"model_type":"qwen2","eos_token_id":"x","dtype":"bfloat16","torch_dtype":7}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`[`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := ParseConfig(b)
		if err != nil {
			if cfg != nil {
				t.Fatalf("ParseConfig returned a config with error %v", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a config Validate refuses: %v", err)
		}
		if cfg.NumHiddenLayers > MaxLayers { // the weight list grows with the layer count
			t.Fatalf("ParseConfig accepted %d layers", cfg.NumHiddenLayers)
		}
		if len(cfg.Tensors()) == 0 {
			t.Fatal("no weights")
		}
		_ = cfg.NumParameters()
		_ = cfg.NumGroups()
	})
}

// FuzzParseGenerationConfig checks generation_config.json (generate's and score's EOS ids).
func FuzzParseGenerationConfig(f *testing.F) {
	f.Add([]byte(`{"bos_token_id":151643,"do_sample":true,"eos_token_id":[151645,151643],"pad_token_id":151643,"repetition_penalty":1.05,"temperature":0.7,"top_k":20,"top_p":0.8}`))
	f.Add([]byte(`{"eos_token_id":5}`))
	f.Add([]byte(`{"eos_token_id":null,"pad_token_id":"a","bos_token_id":-1}`))
	f.Add([]byte(`{"eos_token_id":[1.5]}`))
	f.Add([]byte(`7`))
	f.Fuzz(func(t *testing.T, b []byte) {
		gc, err := ParseGenerationConfig(b)
		if err != nil && gc != nil {
			t.Fatalf("ParseGenerationConfig returned a config with error %v", err)
		}
		if err == nil && gc == nil {
			t.Fatal("no config and no error")
		}
	})
}

// FuzzParseBatchJSON checks score's --input JSON (and the max_new_tokens of score --gen): no
// panic while parsing, validating against the vocabulary, or computing the masks Score builds
// from an accepted batch.
func FuzzParseBatchJSON(f *testing.F) {
	for _, name := range []string{"single.json", "left_pad.json", "right_pad.json"} {
		fuzzSeed(f, filepath.Join(fuzzFixtureDir, "inputs", name))
	}
	f.Add([]byte(`{"input_ids":[[1,2],[3]],"attention_mask":[[1,1]],"completion_start":[0,5,-1]}`))
	f.Add([]byte(`{"input_ids":[[1,2,3]],"completion_start":-7,"max_new_tokens":-1}`))
	f.Add([]byte(`{"input_ids":[[]],"attention_mask":[[0]],"completion_start":null}`))
	f.Add([]byte(`{"input_ids":[[70000]],"extra":1}`))
	f.Add([]byte(`{"input_ids":[[1]],"completion_start":"x"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		batch, _, err := ParseBatchJSON(b)
		if err != nil {
			if batch != nil {
				t.Fatalf("ParseBatchJSON returned a batch with error %v", err)
			}
			return
		}
		if err := batch.Validate(1000); err != nil {
			return
		}
		rows, seq := batch.Dims()
		if rows != len(batch.IDs) || seq != len(batch.IDs[0]) {
			t.Fatalf("Dims %d×%d of a %d-row batch", rows, seq, len(batch.IDs))
		}
		if m := ScoredMask(batch.Mask, batch.CompletionStart); len(m) != rows {
			t.Fatalf("scored mask has %d rows, want %d", len(m), rows)
		}
		if p := PositionIDs(batch.Mask); len(p) != rows {
			t.Fatalf("position ids have %d rows, want %d", len(p), rows)
		}
		for r, last := range LastIndex(batch.Mask) {
			if batch.Mask[r][last] != 1 {
				t.Fatalf("row %d: last index %d is not a real token", r, last)
			}
		}
		_ = PromptsFromBatch(batch)
	})
}
