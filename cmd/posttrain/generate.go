package main

// `posttrain generate`: continue a prompt (or a chat turn, with the model's chat template) with a
// checkpoint of any decoder family (decoder.FamilyNames), greedy or sampled, with the KV cache.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/models/lora"
)

// generateConfig holds the flags of `posttrain generate`.
type generateConfig struct {
	Model        string // local directory or HF repo id
	Prompt       string
	Chat         bool   // render [system,] user with the chat template, add_generation_prompt
	System       string // system message (with --chat)
	Sample       generate.SampleOptions
	MaxNewTokens int
	StepsPerCall int // decode steps per execution (generate.Options.StepsPerCall)
	Seed         uint64
	IgnoreEOS    bool
	JSON         bool
	ComputeDType string
	Backend      string
	KVUpdate     string // auto, where, dynamic (generate.ParseKVUpdate)
	Adapter      string // a PEFT LoRA adapter directory applied to Model ("" = none)
}

// generateOutput is the --json output.
type generateOutput struct {
	Prompt    string    `json:"prompt"` // the text that was tokenized (rendered with --chat)
	PromptIDs []int     `json:"prompt_ids"`
	IDs       []int32   `json:"ids"`
	Text      string    `json:"text"`
	LogProbs  []float64 `json:"logprobs"` // log softmax(logits/T) of each generated token
	Truncated bool      `json:"truncated"`
	EOSIDs    []int     `json:"eos_token_ids"`
	Stats     struct {
		PrefillSeconds  float64 `json:"prefill_seconds"`
		DecodeSeconds   float64 `json:"decode_seconds"`
		TokensPerSecond float64 `json:"decode_tokens_per_second"`
	} `json:"stats"`
}

func init() {
	addCommand(&cli.Command{
		Name:  "generate",
		Usage: "continue a prompt with a " + decoder.FamilyNames() + " checkpoint (greedy, or sampled with temperature/top-k/top-p) and print the completion",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "model", Required: true, Usage: "checkpoint directory or HuggingFace repo id"},
			&cli.StringFlag{Name: "prompt", Required: true, Usage: "prompt text (the user message with --chat)"},
			&cli.BoolFlag{Name: "chat", Usage: "render the prompt as a user turn with the model's chat template (add_generation_prompt)"},
			&cli.StringFlag{Name: "system", Usage: "system message (with --chat)"},
			&cli.IntFlag{Name: "max-new-tokens", Value: 128, Usage: "most tokens to generate"},
			&cli.FloatFlag{Name: "temperature", Usage: "sampling temperature; 0 is greedy (argmax)"},
			&cli.FloatFlag{Name: "top-p", Value: 1, Usage: "nucleus sampling: keep the most probable tokens up to this mass (1: off)"},
			&cli.IntFlag{Name: "top-k", Usage: "keep the k most probable tokens (0: off)"},
			&cli.FloatFlag{Name: "repetition-penalty", Value: 1, Usage: "divide positive (multiply negative) logits of tokens already in the prompt or output by this (1: off)"},
			&cli.FloatFlag{Name: "min-p", Usage: "keep the tokens at least this fraction as probable as the most probable one, after top-k/top-p (0: off)"},
			&cli.Uint64Flag{Name: "seed", Usage: "sampling seed"},
			&cli.BoolFlag{Name: "ignore-eos", Usage: "do not stop at the checkpoint's eos ids"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON: prompt ids, generated ids, text, log-probs, truncated, timings"},
			&cli.StringFlag{Name: "compute-dtype", Value: "float32", Usage: "dtype of weights and activations: float32 or bfloat16"},
			&cli.StringFlag{Name: "adapter", Usage: "a PEFT LoRA adapter directory (adapter_config.json, adapter_model.safetensors) to apply to --model"},
			backendFlag(),
			&cli.IntFlag{Name: "decode-steps-per-call", Value: 1, Usage: "decode steps per execution of the decode graph (unrolled; stop tokens checked after each); the tokens are those of one step per execution"},
			&cli.StringFlag{Name: "kv-update", Value: "auto", Usage: "how a decode step writes the KV cache: auto (DynamicUpdateSlice where the backend has it), where, dynamic"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() > 0 {
				return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
			}
			c := generateConfig{KVUpdate: cmd.String("kv-update"), Model: cmd.String("model"), Prompt: cmd.String("prompt"), Chat: cmd.Bool("chat"),
				System: cmd.String("system"), MaxNewTokens: cmd.Int("max-new-tokens"), Seed: cmd.Uint64("seed"),
				Sample: generate.SampleOptions{Temperature: cmd.Float("temperature"), TopP: cmd.Float("top-p"), TopK: cmd.Int("top-k"), MinP: cmd.Float("min-p"),
					RepetitionPenalty: cmd.Float("repetition-penalty")},
				IgnoreEOS: cmd.Bool("ignore-eos"), JSON: cmd.Bool("json"), ComputeDType: cmd.String("compute-dtype"),
				Backend: cmd.String("backend"), Adapter: cmd.String("adapter"), StepsPerCall: cmd.Int("decode-steps-per-call")}
			if err := c.validate(); err != nil {
				return usageError{fmt.Errorf("%s: %w", cmd.FullName(), err)}
			}
			if err := runGenerate(ctx, c, cmd.Root().Writer, cmd.Root().ErrWriter); err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			return nil
		},
	})
}

func (c generateConfig) validate() error {
	switch {
	case c.MaxNewTokens < 1:
		return fmt.Errorf("--max-new-tokens must be at least 1, got %d", c.MaxNewTokens)
	case c.StepsPerCall < 1:
		return fmt.Errorf("--decode-steps-per-call must be at least 1, got %d", c.StepsPerCall)
	case !(c.Sample.Temperature >= 0) || math.IsInf(c.Sample.Temperature, 0): // NaN too
		return fmt.Errorf("--temperature must be a finite number ≥ 0, got %g", c.Sample.Temperature)
	case !(c.Sample.TopP > 0 && c.Sample.TopP <= 1):
		return fmt.Errorf("--top-p must be in (0, 1], got %g", c.Sample.TopP)
	case !(c.Sample.MinP >= 0 && c.Sample.MinP <= 1):
		return fmt.Errorf("--min-p must be in [0, 1], got %g", c.Sample.MinP)
	case !(c.Sample.RepetitionPenalty > 0) || math.IsInf(c.Sample.RepetitionPenalty, 0):
		return fmt.Errorf("--repetition-penalty must be > 0, got %g", c.Sample.RepetitionPenalty)
	case c.Sample.TopK < 0:
		return fmt.Errorf("--top-k must not be negative, got %d", c.Sample.TopK)
	case c.System != "" && !c.Chat:
		return fmt.Errorf("--system needs --chat")
	}
	if _, err := generate.ParseKVUpdate(c.KVUpdate); err != nil {
		return fmt.Errorf("--kv-update: %w", err)
	}
	if _, err := decoder.ParseDType(c.ComputeDType); err != nil {
		return fmt.Errorf("--compute-dtype: %w", err)
	}
	return nil
}

// runGenerate tokenizes the prompt, generates and prints the completion (or JSON) to w.
func runGenerate(ctx context.Context, c generateConfig, w, errw io.Writer) error {
	dtype, err := decoder.ParseDType(c.ComputeDType)
	if err != nil {
		return err
	}
	dir, b, err := openModel(ctx, errw, c.Model, c.Backend)
	if err != nil {
		return err
	}
	defer b.Finalize()
	txt, err := encode.Load(dir, encode.Options{Template: templateMode(c.Chat)})
	if err != nil {
		return err
	}
	tok := txt.Tokenizer
	out := generateOutput{Prompt: c.Prompt}
	if c.Chat {
		if out.Prompt, err = txt.RenderPrompt(chatMessages(c.System, c.Prompt)); err != nil {
			return err
		}
	}
	out.PromptIDs = tok.Encode(out.Prompt)
	mctx, cfg, err := decoder.Load(dir, dtype)
	if err != nil {
		return err
	}
	if c.Adapter != "" {
		if _, err := lora.Load(mctx, cfg, c.Adapter); err != nil {
			return err
		}
	}
	if out.EOSIDs, err = decoder.EOSTokenIDs(dir, cfg); err != nil {
		return err
	}
	g := generate.NewGenerator(b, mctx, decoder.Arch{Config: cfg})
	defer g.Finalize()
	if g.KVUpdate, err = generate.ParseKVUpdate(c.KVUpdate); err != nil {
		return err
	}
	prompt := make([]int32, len(out.PromptIDs))
	for i, id := range out.PromptIDs {
		prompt[i] = int32(id)
	}
	gens, err := g.Generate([][]int32{prompt}, generate.Options{SampleOptions: c.Sample, MaxNewTokens: c.MaxNewTokens,
		Seed: c.Seed, StopIDs: out.EOSIDs, IgnoreEOS: c.IgnoreEOS, Tokenizer: tok, StepsPerCall: c.StepsPerCall})
	if err != nil {
		return err
	}
	gen, st := gens[0], g.Stats()
	if !c.JSON {
		_, err = fmt.Fprintln(w, gen.Text)
		return err
	}
	out.IDs, out.Text, out.LogProbs, out.Truncated = gen.IDs, gen.Text, gen.LogProbs, gen.Truncated
	out.Stats.PrefillSeconds, out.Stats.DecodeSeconds = st.Prefill.Seconds(), st.Decode.Seconds()
	if st.Decode > 0 {
		out.Stats.TokensPerSecond = float64(st.DecodeSteps) / st.Decode.Seconds()
	}
	return json.NewEncoder(w).Encode(out)
}

// templateMode reads the chat template only for --chat, which needs it.
func templateMode(chat bool) encode.TemplateMode {
	if chat {
		return encode.TemplateRequired
	}
	return encode.NoTemplate
}

// chatMessages is the conversation --chat renders: [system,] user.
func chatMessages(system, prompt string) []chat.Message {
	var msgs []chat.Message
	if system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: system})
	}
	return append(msgs, chat.Message{Role: "user", Content: prompt})
}
