package decoder

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestEOSTokenIDs_ConfigAndGenerationConfig(t *testing.T) {
	cfg := &Config{VocabSize: 152000, EOSTokenIDs: []int{151645}}
	for _, c := range []struct {
		gen  string // generation_config.json; "" = absent
		want []int
		err  string
	}{
		{"", []int{151645}, ""},
		{`{"eos_token_id": 151643}`, []int{151645, 151643}, ""},
		{`{"bos_token_id": 151643, "eos_token_id": [151645, 151643], "do_sample": true, "top_p": 0.8}`, []int{151645, 151643}, ""},
		{`{"eos_token_id": null}`, []int{151645}, ""},
		{`{"eos_token_id": "<|im_end|>"}`, nil, "eos_token_id"},
		{`{"eos_token_id": [200000]}`, nil, "outside the vocabulary"},
		{`{"eos_token_id": [1,`, nil, "parse generation config"},
	} {
		dir := t.TempDir()
		if c.gen != "" {
			if err := os.WriteFile(filepath.Join(dir, GenerationConfigFileName), []byte(c.gen), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := EOSTokenIDs(dir, cfg)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), dir) {
				t.Errorf("%s: got %v, %v; want an error naming %s and containing %q", c.gen, got, err, dir, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v, %v; want %v", c.gen, got, err, c.want)
		}
	}
}
