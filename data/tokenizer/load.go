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
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

// FromJSON builds a tokenizer from the contents of a tokenizer.json; name (the file) prefixes
// errors. Only what Qwen2/2.5/3 use is accepted: NFC or no normalizer, Qwen's Split regex then
// ByteLevel, a BPE model without dropout or subword affixes, ByteLevel decoding. Anything else
// is an error naming the field, never a silent approximation.
func FromJSON(data []byte, name string) (*BPE, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := checkPipeline(&tj); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	m, err := buildModel(&tj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	t := &BPE{model: m}
	t.nfc = componentType(tj.Normalizer) == "NFC"
	if err := t.setAddedTokens(tj.AddedTokens); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// component is the shape shared by normalizers, pre-tokenizers, post-processors and decoders.
type component struct {
	Type           string          `json:"type"`
	Pretokenizers  []component     `json:"pretokenizers"`
	Pattern        json.RawMessage `json:"pattern"`
	Behavior       string          `json:"behavior"`
	Invert         bool            `json:"invert"`
	AddPrefixSpace bool            `json:"add_prefix_space"`
	UseRegex       bool            `json:"use_regex"`
}

func componentType(raw json.RawMessage) string {
	var c component
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil {
		return ""
	}
	return c.Type
}

// checkPipeline rejects the normalizers, pre-tokenizers, processors and decoders not implemented.
func checkPipeline(tj *tokenizerJSON) error {
	for _, f := range []struct {
		field string
		raw   json.RawMessage
	}{{"truncation", tj.Truncation}, {"padding", tj.Padding}} {
		if len(f.raw) > 0 && string(f.raw) != "null" {
			return fmt.Errorf("%s: must be null (set truncation and padding in posttrain instead)", f.field)
		}
	}
	if typ := componentType(tj.Normalizer); typ != "" && typ != "NFC" {
		return fmt.Errorf("normalizer: type %q is not supported (only NFC or null)", typ)
	}
	if err := checkPreTokenizer(tj.PreTokenizer); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	for _, f := range []struct {
		field string
		raw   json.RawMessage
	}{{"post_processor", tj.PostProcessor}, {"decoder", tj.Decoder}} {
		var c component
		if len(f.raw) == 0 || string(f.raw) == "null" {
			if f.field == "decoder" {
				return fmt.Errorf("decoder: missing (want ByteLevel)")
			}
			continue
		}
		if err := json.Unmarshal(f.raw, &c); err != nil {
			return fmt.Errorf("%s: %w", f.field, err)
		}
		if c.Type != "ByteLevel" {
			return fmt.Errorf("%s: type %q is not supported (only ByteLevel)", f.field, c.Type)
		}
	}
	return nil
}

// checkPreTokenizer accepts Sequence[Split(Qwen's regex, Isolated), ByteLevel(no prefix space,
// no regex)].
func checkPreTokenizer(raw json.RawMessage) error {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if c.Type != "Sequence" || len(c.Pretokenizers) != 2 {
		return fmt.Errorf("want a Sequence of Split and ByteLevel, got %s", compact(raw))
	}
	split, bl := c.Pretokenizers[0], c.Pretokenizers[1]
	var pat struct{ Regex string }
	_ = json.Unmarshal(split.Pattern, &pat)
	switch {
	case split.Type != "Split" || split.Behavior != "Isolated" || split.Invert:
		return fmt.Errorf("pretokenizers[0]: want Split with behavior Isolated, got %s", compact(raw))
	case pat.Regex != qwenPattern:
		return fmt.Errorf("pretokenizers[0].pattern: regex %q is not Qwen2's %q", pat.Regex, qwenPattern)
	case bl.Type != "ByteLevel" || bl.AddPrefixSpace || bl.UseRegex:
		return fmt.Errorf("pretokenizers[1]: want ByteLevel without add_prefix_space and use_regex")
	}
	return nil
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.Len() > 300 {
		return "(unsupported)"
	}
	return b.String()
}
