package demo

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/bpetrain"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
)

// Split is the demo's division of the multiplication problems a×b (a, b in [2, maxFactor]; the
// course uses 19) into the problems GRPO trains on and held-out ones GRPO never samples, by a
// seeded shuffle of the ordered pairs. SFT sees the answers of both (a model this small does not
// learn products it was never shown: without them held-out accuracy stays at chance).
type Split struct {
	Train, HeldOut []mult.Problem
}

// NewSplit shuffles the problems a×b, a and b in [mult.Lo, maxFactor], with seed and holds out the
// first heldOut.
func NewSplit(maxFactor, heldOut int, seed uint64) (Split, error) {
	if maxFactor < mult.Lo+1 || maxFactor > mult.Hi {
		return Split{}, fmt.Errorf("demo: the largest factor must be in [%d, %d], got %d", mult.Lo+1, mult.Hi, maxFactor)
	}
	var all []mult.Problem
	for a := mult.Lo; a <= maxFactor; a++ {
		for b := mult.Lo; b <= maxFactor; b++ {
			all = append(all, mult.Problem{A: a, B: b})
		}
	}
	if heldOut < 1 || heldOut >= len(all) {
		return Split{}, fmt.Errorf("demo: held-out problems must be in [1, %d), got %d", len(all), heldOut)
	}
	rng := rand.New(rand.NewPCG(seed, 0xd3e0))
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return Split{HeldOut: all[:heldOut], Train: all[heldOut:]}, nil
}

// SystemPrompt replaces Qwen2.5's default system prompt ("You are Qwen, created by Alibaba
// Cloud. ...", which the template inserts when a conversation has none) to keep the sequences
// short: 25 prompt tokens instead of 41.
const SystemPrompt = "calc"

// Prompter makes a problem's conversation: the course's question (mult.Problem.Prompt), or
// Template with {a} and {b} replaced by the factors, as the user turn, after SystemPrompt for the
// demo's own model; a pretrained model gets the user turn alone (its chat template adds its own
// default system prompt, as a TRL dataset of user messages gets it).
type Prompter struct {
	Pretrained bool
	Template   string
}

// CheckTemplate reports whether a prompt template names both factors.
func CheckTemplate(t string) error {
	if !strings.Contains(t, "{a}") || !strings.Contains(t, "{b}") {
		return fmt.Errorf("the prompt template must contain {a} and {b}, got %q", t)
	}
	return nil
}

// Messages is p's conversation.
func (q Prompter) Messages(p mult.Problem) []chat.Message {
	text := p.Prompt()
	if q.Template != "" {
		text = strings.NewReplacer("{a}", strconv.Itoa(p.A), "{b}", strconv.Itoa(p.B)).Replace(q.Template)
	}
	var msgs []chat.Message
	if !q.Pretrained {
		msgs = append(msgs, chat.Message{Role: "system", Content: SystemPrompt})
	}
	return append(msgs, chat.Message{Role: "user", Content: text})
}

// SFT answer formats: FormatBare answers every problem with the bare product ("72"); FormatMixed
// answers each problem MixedCopies times, MixedSentences of them in the sentence form
// "72"+SentenceSuffix and the rest bare, so the format is a habit shared by every problem (the
// verifier mult_correct accepts both forms, mult_strict only the bare one).
const (
	FormatBare     = "bare"
	FormatMixed    = "mixed"
	SentenceSuffix = "."
	MixedCopies    = 10
	MixedSentences = 7
)

// SFTDataset is the conversational prompt-completion dataset of problems (answer = a·b) in format,
// the conversations made by q.
func SFTDataset(ps []mult.Problem, format string, q Prompter) (*data.Dataset, error) {
	copies, sentences := 1, 0
	switch format {
	case FormatBare:
	case FormatMixed:
		copies, sentences = MixedCopies, MixedSentences
	default:
		return nil, fmt.Errorf("demo: SFT format must be %q or %q, got %q", FormatBare, FormatMixed, format)
	}
	d := &data.Dataset{Path: "demo-sft", Format: data.PromptCompletion, Conversational: true}
	for _, p := range ps {
		for k := range copies {
			answer := strconv.Itoa(p.Answer())
			if k < sentences {
				answer += SentenceSuffix
			}
			d.Rows = append(d.Rows, data.Row{Line: len(d.Rows) + 1, Prompt: data.Text{Messages: q.Messages(p)},
				Completion: data.Text{Messages: []chat.Message{{Role: "assistant", Content: answer}}}})
		}
	}
	return d, nil
}

// PromptRows are the conversational prompt-only rows of problems with their "answer" column, as
// `posttrain data mult --kind grpo` writes them.
func PromptRows(ps []mult.Problem, q Prompter) []data.Row {
	rows := make([]data.Row, len(ps))
	for i, p := range ps {
		rows[i] = data.Row{Line: i + 1, Prompt: data.Text{Messages: q.Messages(p)},
			Columns: map[string]any{"answer": strconv.Itoa(p.Answer())}}
	}
	return rows
}

// ModelShape sizes the demo's Qwen2-architecture model.
type ModelShape struct {
	Hidden, Intermediate, Layers, Heads, KVHeads int
}

// WriteBase trains the demo's byte-level BPE tokenizer on bpetrain.DemoCorpus (HF layout in
// dir/tokenizer) and writes a randomly initialised Qwen2 checkpoint with it to dir/base.
func WriteBase(dir string, shape ModelShape, seed uint64) (string, error) {
	texts, err := bpetrain.DemoCorpus()
	if err != nil {
		return "", err
	}
	return writeBase(dir, shape, seed, texts, "")
}

// writeBase is WriteBase on the corpus texts, the tokenizer saved with template (Qwen2.5's when
// "").
func writeBase(dir string, shape ModelShape, seed uint64, texts []string, template string) (string, error) {
	res, err := bpetrain.Train(bpetrain.Config{VocabSize: bpetrain.DemoVocabSize, MinFrequency: 2}, texts)
	if err != nil {
		return "", fmt.Errorf("demo tokenizer: %w", err)
	}
	res.ChatTemplate = template
	tokDir := filepath.Join(dir, "tokenizer")
	if err := os.MkdirAll(tokDir, 0o755); err != nil {
		return "", err
	}
	if err := res.Save(tokDir); err != nil {
		return "", fmt.Errorf("demo tokenizer: %w", err)
	}
	txt, err := encode.Load(tokDir, encode.Options{Template: encode.NoTemplate})
	if err != nil {
		return "", fmt.Errorf("demo tokenizer: %w", err)
	}
	tok := txt.Tokenizer
	cfg, err := decoder.Preset("tiny")
	if err != nil {
		return "", err
	}
	cfg.VocabSize = tok.VocabSize()
	cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = shape.Hidden, shape.Intermediate, shape.Layers
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads = shape.Heads, shape.KVHeads
	cfg.HeadDim = shape.Hidden / shape.Heads
	cfg.MaxPositionEmbeddings = 512
	_, eos, err := txt.EOS()
	if err != nil {
		return "", fmt.Errorf("demo tokenizer: %w", err)
	}
	pad, _ := tok.TokenToID("<|endoftext|>")
	cfg.BOSTokenID, cfg.EOSTokenIDs = &pad, []int{eos}
	if err := cfg.Validate(); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	base := filepath.Join(dir, "base")
	gen := &decoder.GenerationConfig{BOSTokenID: &pad, EOSTokenIDs: []int{eos}, PadTokenID: &pad}
	if err := decoder.InitCheckpoint(base, cfg, seed, decoder.SaveOptions{TokenizerPath: tokDir, Generation: gen, Overwrite: true, WrittenBy: "posttrain demo"}); err != nil {
		return "", err
	}
	return base, nil
}
