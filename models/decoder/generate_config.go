package decoder

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// GenerationConfigFileName is the HF file holding a checkpoint's generation defaults.
const GenerationConfigFileName = "generation_config.json"

// GenerationConfig is the part of a HF generation_config.json that matters here: the special
// token ids (eos_token_id may be one id or a list) and the sampling defaults, kept for reporting.
type GenerationConfig struct {
	BOSTokenID  *int
	EOSTokenIDs []int
	PadTokenID  *int
	DoSample    bool     `json:"do_sample"`
	Temperature *float64 `json:"temperature"`
	TopP        *float64 `json:"top_p"`
	TopK        *int     `json:"top_k"`
}

// ReadGenerationConfig reads dir/generation_config.json; a missing file gives (nil, nil).
func ReadGenerationConfig(dir string) (*GenerationConfig, error) {
	path := filepath.Join(dir, GenerationConfigFileName)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	gc, err := ParseGenerationConfig(data)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	return gc, nil
}

// ParseGenerationConfig parses the content of a generation_config.json.
func ParseGenerationConfig(data []byte) (*GenerationConfig, error) {
	gc := &GenerationConfig{}
	if err := json.Unmarshal(data, gc); err != nil {
		return nil, fmt.Errorf("parse generation config: %w", err)
	}
	var ids struct {
		BOS json.RawMessage `json:"bos_token_id"`
		EOS json.RawMessage `json:"eos_token_id"`
		Pad json.RawMessage `json:"pad_token_id"`
	}
	_ = json.Unmarshal(data, &ids) // already known to be a JSON object
	var err error
	if gc.BOSTokenID, err = optionalID(ids.BOS); err != nil {
		return nil, fmt.Errorf("generation config field bos_token_id: %w", err)
	}
	if gc.EOSTokenIDs, err = idList(ids.EOS); err != nil {
		return nil, fmt.Errorf("generation config field eos_token_id: %w", err)
	}
	if gc.PadTokenID, err = optionalID(ids.Pad); err != nil {
		return nil, fmt.Errorf("generation config field pad_token_id: %w", err)
	}
	return gc, nil
}

// EOSTokenIDs returns every end-of-sequence id the checkpoint in dir declares: config.json's
// eos_token_id (cfg) then generation_config.json's, without duplicates. Qwen2.5-Instruct:
// [151645, 151643] (<|im_end|>, <|endoftext|>).
func EOSTokenIDs(dir string, cfg *Config) ([]int, error) {
	ids := slices.Clone(cfg.EOSTokenIDs)
	gc, err := ReadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	if gc != nil {
		for _, id := range gc.EOSTokenIDs {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		if id < 0 || id >= cfg.VocabSize {
			return nil, fmt.Errorf("%s %s: eos_token_id %d is outside the vocabulary [0, %d)", cfg.errName(), dir, id, cfg.VocabSize)
		}
	}
	return ids, nil
}
