package bpetrain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/internal/fsmode"
)

// The tokenizer.json pipeline of Qwen2/2.5/3, field for field in HuggingFace's order.
type (
	typed struct {
		Type string `json:"type"`
	}
	byteLevel struct {
		Type           string `json:"type"`
		AddPrefixSpace bool   `json:"add_prefix_space"`
		TrimOffsets    bool   `json:"trim_offsets"`
		UseRegex       bool   `json:"use_regex"`
	}
	split struct {
		Type    string `json:"type"`
		Pattern struct {
			Regex string `json:"Regex"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	sequence struct {
		Type          string `json:"type"`
		Pretokenizers []any  `json:"pretokenizers"`
	}
	bpeModel struct {
		Type                    string      `json:"type"`
		Dropout                 *float64    `json:"dropout"`
		UnkToken                *string     `json:"unk_token"`
		ContinuingSubwordPrefix string      `json:"continuing_subword_prefix"`
		EndOfWordSuffix         string      `json:"end_of_word_suffix"`
		FuseUnk                 bool        `json:"fuse_unk"`
		ByteFallback            bool        `json:"byte_fallback"`
		IgnoreMerges            bool        `json:"ignore_merges"`
		Vocab                   vocabByID   `json:"vocab"`
		Merges                  [][2]string `json:"merges"`
	}
	tokenizerFile struct {
		Version       string                 `json:"version"`
		Truncation    any                    `json:"truncation"`
		Padding       any                    `json:"padding"`
		AddedTokens   []tokenizer.AddedToken `json:"added_tokens"`
		Normalizer    typed                  `json:"normalizer"`
		PreTokenizer  sequence               `json:"pre_tokenizer"`
		PostProcessor byteLevel              `json:"post_processor"`
		Decoder       byteLevel              `json:"decoder"`
		Model         bpeModel               `json:"model"`
	}
)

// vocabByID is the vocabulary as a JSON object in id order, as HuggingFace writes it.
type vocabByID []string

func (v vocabByID) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for id, tok := range v {
		if id > 0 {
			b.WriteByte(',')
		}
		b.Write(jsonString(tok))
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(id))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonString quotes s without HTML escaping ("<", not "\u003c").
func jsonString(s string) []byte {
	b, _ := marshal(s, "")
	return bytes.TrimSuffix(b, []byte("\n"))
}

// marshal encodes v as JSON with the given indent, without HTML escaping, ending in a newline.
func marshal(v any, indent string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// TokenizerJSON returns the tokenizer.json: Qwen2's pipeline (NFC, Split with Qwen's regex then
// ByteLevel, BPE, ByteLevel decoding) with this vocabulary, merges and added tokens.
func (r *Result) TokenizerJSON() ([]byte, error) {
	bl := byteLevel{Type: "ByteLevel"}
	sp := split{Type: "Split", Behavior: "Isolated"}
	sp.Pattern.Regex = tokenizer.QwenPattern
	f := tokenizerFile{
		Version:       "1.0",
		AddedTokens:   r.Added,
		Normalizer:    typed{"NFC"},
		PreTokenizer:  sequence{Type: "Sequence", Pretokenizers: []any{sp, bl}},
		PostProcessor: bl,
		Decoder:       bl,
		Model:         bpeModel{Type: "BPE", Vocab: r.Tokens, Merges: r.Merges},
	}
	if f.Model.Merges == nil {
		f.Model.Merges = [][2]string{}
	}
	return marshal(f, "  ")
}

// ConfigJSON returns the tokenizer_config.json of Qwen2.5-Instruct with this tokenizer's added
// tokens: eos_token <|im_end|>, pad_token <|endoftext|>, bos_token null and Qwen2.5-Instruct's
// chat template (or the Result's ChatTemplate). Keys are sorted, as transformers writes them.
func (r *Result) ConfigJSON() ([]byte, error) {
	decoder := map[string]any{}
	for _, a := range r.Added {
		decoder[strconv.Itoa(a.ID)] = map[string]any{"content": a.Content, "lstrip": a.LStrip,
			"normalized": a.Normalized, "rstrip": a.RStrip, "single_word": a.SingleWord, "special": a.Special}
	}
	cfg := map[string]any{
		"add_bos_token":                false,
		"add_prefix_space":             false,
		"added_tokens_decoder":         decoder,
		"additional_special_tokens":    []string{"<|im_start|>", "<|im_end|>"},
		"bos_token":                    nil,
		"chat_template":                r.template(),
		"clean_up_tokenization_spaces": false,
		"eos_token":                    "<|im_end|>",
		"errors":                       "replace",
		"model_max_length":             r.ModelMaxLength,
		"pad_token":                    "<|endoftext|>",
		"split_special_tokens":         false,
		"tokenizer_class":              "Qwen2Tokenizer",
		"unk_token":                    nil,
	}
	return marshal(cfg, "  ")
}

// template is the chat template the tokenizer is saved with: ChatTemplate unless ChatTemplate
// was set on the Result.
func (r *Result) template() string {
	if r.ChatTemplate != "" {
		return r.ChatTemplate
	}
	return ChatTemplate
}

// vocabJSON and mergesTXT are the slow tokenizer's files (transformers' Qwen2Tokenizer): the
// vocabulary with sorted keys, and "#version: 0.2" then one "a b" merge per line.
func (r *Result) vocabJSON() ([]byte, error) {
	m := make(map[string]int, len(r.Tokens))
	for id, t := range r.Tokens {
		if _, dup := m[t]; !dup {
			m[t] = id
		}
	}
	return marshal(m, "  ")
}

func (r *Result) mergesTXT() []byte {
	var b strings.Builder
	b.WriteString("#version: 0.2\n")
	for _, m := range r.Merges {
		b.WriteString(m[0] + " " + m[1] + "\n")
	}
	return []byte(b.String())
}

// Files lists the files Save writes, in writing order.
var Files = []string{"vocab.json", "merges.txt", "tokenizer.json", "tokenizer_config.json"}

// Save writes tokenizer.json, tokenizer_config.json, vocab.json and merges.txt into dir (created
// if needed). Each file is written to a temporary file in dir and renamed over the old one, so a
// reader never sees a partial file.
func (r *Result) Save(dir string) error {
	contents := map[string]func() ([]byte, error){
		"vocab.json":            r.vocabJSON,
		"merges.txt":            func() ([]byte, error) { return r.mergesTXT(), nil },
		"tokenizer.json":        r.TokenizerJSON,
		"tokenizer_config.json": r.ConfigJSON,
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save tokenizer: %w", err)
	}
	for _, name := range Files {
		data, err := contents[name]()
		if err != nil {
			return fmt.Errorf("save tokenizer: %s: %w", name, err)
		}
		if err := writeAtomic(filepath.Join(dir, name), data); err != nil {
			return fmt.Errorf("save tokenizer: %w", err)
		}
	}
	return nil
}

func writeAtomic(path string, data []byte) error {
	f, err := fsmode.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
