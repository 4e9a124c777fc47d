package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Load reads a tokenizer from path: a tokenizer.json (optionally gzip-compressed, *.gz), or a
// model directory holding one (tokenizer.json, else tokenizer.json.gz). A tokenizer_config.json (and chat_template.jinja) in the same
// directory is read into Config and checked against the tokenizer; it is optional.
func Load(path string) (*BPE, error) {
	file, dir, err := resolve(path)
	if err != nil {
		return nil, err
	}
	data, err := readMaybeGzip(file)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer: %w", err)
	}
	t, err := FromJSON(data, file)
	if err != nil {
		return nil, err
	}
	cfg, err := LoadConfig(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return t, nil
	}
	if err != nil {
		return nil, err
	}
	if err := t.checkConfig(cfg); err != nil {
		return nil, err
	}
	if err := t.applyConfigSpecials(cfg); err != nil {
		return nil, err
	}
	t.config = cfg
	return t, nil
}

// resolve returns the tokenizer.json file and the directory of its tokenizer_config.json.
func resolve(path string) (file, dir string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("load tokenizer: %w", err)
	}
	if st.IsDir() {
		file := filepath.Join(path, "tokenizer.json")
		if _, err := os.Stat(file + ".gz"); err == nil {
			if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
				file += ".gz"
			}
		}
		return file, path, nil
	}
	return path, filepath.Dir(path), nil
}

func readMaybeGzip(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil || !strings.HasSuffix(file, ".gz") {
		return data, err
	}
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if data, err = io.ReadAll(zr); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return data, nil
}

// tokenizerJSON is the part of tokenizer.json this package reads.
type tokenizerJSON struct {
	AddedTokens   []AddedToken    `json:"added_tokens"`
	Truncation    json.RawMessage `json:"truncation"`
	Padding       json.RawMessage `json:"padding"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		ByteFallback            bool            `json:"byte_fallback"`
		UnkToken                *string         `json:"unk_token"`
		FuseUnk                 bool            `json:"fuse_unk"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json; name (the file) prefixes
// errors. The file's own pipeline is built (pipeline.go): NFC, Replace, Prepend or no
// normalizer; Split (Qwen2's, Llama 3's or GPT-2's regex, or a String), ByteLevel, Digits
// pre-tokenizers; a BPE model without dropout or subword affixes, over the ByteLevel alphabet or
// with byte fallback; TemplateProcessing / ByteLevel post-processing; ByteLevel or
// Replace/ByteFallback/Fuse/Strip decoding. Anything else is an error naming the field, never a
// silent approximation.
func FromJSON(data []byte, name string) (*BPE, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t, err := build(&tj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

func build(tj *tokenizerJSON) (*BPE, error) {
	// truncation and padding are read and not applied, as transformers does: its fast tokenizer
	// takes them only as defaults (truncation_side, padding_side, max_length) and each call sets
	// its own strategy, so a plain encode or apply_chat_template neither truncates nor pads
	// (transformers 4.57.6 on a tokenizer.json that TRL's GRPOTrainer saved with truncation
	// max_length 512 and left padding: an 801-token text stays 801 tokens; the tokenizers library
	// alone would cut it to 512). posttrain truncates and pads where its trainers say.
	for _, f := range []struct {
		field string
		raw   json.RawMessage
	}{{"truncation", tj.Truncation}, {"padding", tj.Padding}} {
		if len(f.raw) > 0 && string(f.raw) != "null" {
			var obj map[string]any
			if err := json.Unmarshal(f.raw, &obj); err != nil {
				return nil, fmt.Errorf("%s: want null or an object: %w", f.field, err)
			}
		}
	}
	t := &BPE{pre: &preTokenizer{}}
	comp := func(field string, raw json.RawMessage) (*component, error) {
		c, err := parseComponent(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
		return c, nil
	}
	c, err := comp("normalizer", tj.Normalizer)
	if err != nil {
		return nil, err
	}
	if t.normalizers, err = buildNormalizer(c, "normalizer"); err != nil {
		return nil, err
	}
	t.nfcOnly = len(t.normalizers) == 1 && c.Type == "NFC"
	if c, err = comp("pre_tokenizer", tj.PreTokenizer); err != nil {
		return nil, err
	}
	if err := buildPreTokenizer(c, "pre_tokenizer", t.pre); err != nil {
		return nil, err
	}
	if c, err = comp("decoder", tj.Decoder); err != nil {
		return nil, err
	}
	if t.decoder, t.byteLevelDecoder, err = buildDecoder(c, "decoder"); err != nil {
		return nil, err
	}
	if t.model, err = buildModel(tj, t.pre.byteLevel); err != nil {
		return nil, err
	}
	if err := t.setAddedTokens(tj.AddedTokens); err != nil {
		return nil, err
	}
	if c, err = comp("post_processor", tj.PostProcessor); err != nil {
		return nil, err
	}
	if t.prefix, t.suffix, err = buildPostProcessor(c, "post_processor", t.TokenToID); err != nil {
		return nil, err
	}
	return t, nil
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.Len() > 300 {
		return "(unsupported)"
	}
	return b.String()
}
