// Package bpetrain trains a small byte-level BPE tokenizer of the Qwen2 family and writes it in
// HuggingFace layout (tokenizer.json, tokenizer_config.json, vocab.json, merges.txt), so that
// data/tokenizer and HuggingFace `tokenizers` load it and cut text into the same tokens.
//
// Training is HuggingFace's BpeTrainer on Qwen's pipeline: the special tokens are cut out of the
// text, each remaining piece is NFC-normalized and split into words by Qwen's pre-tokenizer
// (data/tokenizer.SplitWords, the very code that encodes); words are counted; every word starts
// as its bytes in the ByteLevel alphabet; then the most frequent adjacent pair, counted over all
// words weighted by their counts, is merged into a new token, again and again. testdata/golden.json
// holds the merges HuggingFace's trainer learns on the same corpora; the tests require equality.
package bpetrain

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/posttrain/posttrain/data/tokenizer"
)

// Specials are the special tokens, added after the learned vocabulary in this order with
// special=true and normalized=false, as Qwen2's <|endoftext|>, <|im_start|>, <|im_end|>
// (151643-151645).
var Specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// DefaultModelMaxLength is Qwen2.5-Instruct's tokenizer_config.json model_max_length.
const DefaultModelMaxLength = 131072

// Config sets what to learn.
type Config struct {
	// VocabSize is the number of tokens in all, as HuggingFace's BpeTrainer counts it and as
	// tokenizer.Tokenizer.VocabSize reports it: the 256 byte tokens, one per merge and the
	// len(Specials) added tokens. Training stops early when no pair is left to merge.
	VocabSize int
	// MinFrequency stops training when the most frequent pair occurs fewer times (BpeTrainer's
	// min_frequency; 0 and 1 both merge any pair that occurs).
	MinFrequency int
	// ModelMaxLength is tokenizer_config.json's model_max_length; 0 means DefaultModelMaxLength.
	ModelMaxLength int
}

// MinVocabSize is the smallest VocabSize: the byte tokens and the specials.
func MinVocabSize() int { return 256 + len(Specials) }

// Validate checks the config.
func (c Config) Validate() error {
	switch {
	case c.VocabSize < MinVocabSize():
		return fmt.Errorf("vocab size %d is below %d (256 byte tokens + %d special tokens)", c.VocabSize, MinVocabSize(), len(Specials))
	case c.VocabSize > 1<<24:
		return fmt.Errorf("vocab size %d is too large (max %d)", c.VocabSize, 1<<24)
	case c.MinFrequency < 0:
		return fmt.Errorf("min frequency must be ≥ 0, got %d", c.MinFrequency)
	case c.ModelMaxLength < 0:
		return fmt.Errorf("model max length must be ≥ 0, got %d", c.ModelMaxLength)
	}
	return nil
}

// Trainer counts the words of a corpus fed to it, then learns merges from the counts. The order
// in which texts are fed does not change the result.
type Trainer struct {
	cfg   Config
	words map[string]int // raw bytes of a word → occurrences
}

// New returns a Trainer with no text fed yet.
func New(cfg Config) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Trainer{cfg: cfg, words: make(map[string]int)}, nil
}

// Feed counts the words of one text, as HuggingFace's trainer sees a sequence: the special tokens
// are cut out, each piece is NFC-normalized and pre-tokenized. Invalid UTF-8 is an error:
// HuggingFace accepts only strings.
//
// One difference from HuggingFace on purpose: its trainer counts an added token found in the text
// as one more word and so spends merges on "<|" + "im", "<|im" + "_", ...; here the specials are
// not counted, since encoding always matches them whole and those merges would never be used.
func (t *Trainer) Feed(text string) error {
	if !utf8.ValidString(text) {
		return errors.New("text is not valid UTF-8")
	}
	for _, piece := range splitSpecials(text) {
		tokenizer.SplitWords(norm.NFC.String(piece), func(w string) { t.words[w]++ })
	}
	return nil
}

// FeedLines feeds r one line at a time, each with its line ending, as HuggingFace's
// tokenizer.train(files) reads a corpus file; name prefixes errors.
func (t *Trainer) FeedLines(r io.Reader, name string) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		line, err := br.ReadString('\n')
		if line != "" {
			if ferr := t.Feed(line); ferr != nil {
				return fmt.Errorf("%s: line %d: %w", name, n, ferr)
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
}

// Words returns the number of distinct words counted so far.
func (t *Trainer) Words() int { return len(t.words) }

// splitSpecials returns the pieces of text between occurrences of the special tokens. None of
// Specials is a prefix of another, so the leftmost occurrence is the one HuggingFace matches.
func splitSpecials(text string) []string {
	var pieces []string
	for {
		at, n := -1, 0
		for _, s := range Specials {
			if i := strings.Index(text, s); i >= 0 && (at < 0 || i < at) {
				at, n = i, len(s)
			}
		}
		if at < 0 {
			return append(pieces, text)
		}
		if at > 0 {
			pieces = append(pieces, text[:at])
		}
		text = text[at+n:]
	}
}

// Train learns the merges from the words fed so far.
func (t *Trainer) Train() *Result {
	words := make([]string, 0, len(t.words))
	for w := range t.words {
		words = append(words, w)
	}
	sort.Strings(words) // the result does not depend on it; the work order does
	counts := make([]int, len(words))
	for i, w := range words {
		counts[i] = t.words[w]
	}
	maxLen := t.cfg.ModelMaxLength
	if maxLen == 0 {
		maxLen = DefaultModelMaxLength
	}
	tokens, merges := learn(words, counts, t.cfg.VocabSize-len(Specials), t.cfg.MinFrequency)
	r := &Result{Tokens: tokens, Merges: merges, ModelMaxLength: maxLen}
	for i, s := range Specials {
		r.Added = append(r.Added, tokenizer.AddedToken{ID: len(tokens) + i, Content: s, Special: true})
	}
	return r
}

// Train feeds texts to a new Trainer and trains it.
func Train(cfg Config, texts []string) (*Result, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	for i, s := range texts {
		if err := t.Feed(s); err != nil {
			return nil, fmt.Errorf("text %d: %w", i, err)
		}
	}
	return t.Train(), nil
}

// Result is a trained tokenizer.
type Result struct {
	Tokens         []string    // id → token in its ByteLevel spelling: 256 bytes, then merges
	Merges         [][2]string // in rank order; Merges[i] made a token (possibly made before)
	Added          []tokenizer.AddedToken
	ModelMaxLength int
	// ChatTemplate, when set, replaces Qwen2.5-Instruct's (ChatTemplate) in the saved
	// tokenizer_config.json.
	ChatTemplate string
}

// VocabSize is the number of tokens: model vocabulary plus added tokens.
func (r *Result) VocabSize() int { return len(r.Tokens) + len(r.Added) }
