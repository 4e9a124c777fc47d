package main

// `posttrain export gguf --model DIR --out FILE.gguf --type f16|bf16|q8_0|q4_k_m [--adapter DIR]`:
// a trained checkpoint (or a base with a LoRA adapter merged as `posttrain merge` merges it) as a
// llama.cpp GGUF with its tokenizer and chat template, and an ollama Modelfile beside it.

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/gguf"
)

// exportConfig holds the flags of `posttrain export gguf`.
type exportConfig struct {
	Model, Adapter, Out, Type string
}

func init() {
	addCommand(&cli.Command{
		Name:  "export",
		Usage: "write a checkpoint in another program's format (gguf: llama.cpp and ollama)",
		Commands: []*cli.Command{{
			Name:  "gguf",
			Usage: "write a checkpoint (with a LoRA adapter merged) as a llama.cpp GGUF file and an ollama Modelfile",
			Description: "Writes what llama.cpp's convert_hf_to_gguf.py (and, for q4_k_m, llama-quantize) would: the\n" +
				"<arch>.* and tokenizer.* metadata with the chat template, tensors under llama.cpp's names with its\n" +
				"changes (llama's Q/K row permutation, Gemma's norms + 1, Llama 3's rope_freqs), 1-D tensors and\n" +
				"norms F32. --type: f16, bf16, q8_0 (F16 for rows that are not whole 32-blocks), q4_k_m\n" +
				"(llama.cpp's mix: Q4_K, Q6_K for the output and half of attn_v/ffn_down, its fallbacks for rows\n" +
				"that are not whole 256-blocks). Architectures: llama (SmolLM2, Llama 3), qwen2, qwen3, gemma3.\n" +
				"A Modelfile (FROM, TEMPLATE for ChatML, Llama 3 and Gemma templates, PARAMETER stop) is\n" +
				"written beside --out.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "model", Required: true, Usage: "checkpoint directory or HuggingFace repo id"},
				&cli.StringFlag{Name: "out", Required: true, Usage: "GGUF file to write (written whole or not at all); the Modelfile goes beside it"},
				&cli.StringFlag{Name: "type", Value: "f16", Usage: "tensor type: " + strings.Join(gguf.ExportTypeNames, ", ")},
				&cli.StringFlag{Name: "adapter", Usage: "PEFT LoRA adapter directory to merge in first (as posttrain merge does)"},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() > 0 {
					return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
				}
				c := exportConfig{Model: cmd.String("model"), Adapter: cmd.String("adapter"), Out: cmd.String("out"), Type: cmd.String("type")}
				if _, ok := gguf.ExportTypes[c.Type]; !ok {
					return usageError{fmt.Errorf("%s: --type %q is not supported (valid: %s)", cmd.FullName(), c.Type, strings.Join(gguf.ExportTypeNames, ", "))}
				}
				if err := runExportGGUF(ctx, c, cmd.Root().Writer); err != nil {
					return fmt.Errorf("%s: %w", cmd.FullName(), err)
				}
				return nil
			},
		}},
	})
}

func runExportGGUF(ctx context.Context, c exportConfig, w io.Writer) error {
	if st, err := os.Stat(filepath.Dir(c.Out)); err != nil || !st.IsDir() {
		return fmt.Errorf("--out %s: its directory %s does not exist", c.Out, filepath.Dir(c.Out))
	}
	if st, err := os.Stat(c.Out); err == nil && st.IsDir() {
		return fmt.Errorf("--out %s is a directory; give the GGUF file's path", c.Out)
	}
	if c.Adapter != "" {
		if st, err := os.Stat(c.Adapter); err != nil || !st.IsDir() {
			return fmt.Errorf("--adapter %s: not a directory", c.Adapter)
		}
	}
	dir, err := resolveModel(ctx, c.Model)
	if err != nil {
		return fmt.Errorf("--model %s: %w", c.Model, err)
	}
	inputs := []checkpoint.Input{{Name: "the model (--model)", Path: dir}, {Name: "the adapter (--adapter)", Path: c.Adapter}}
	if err := checkpoint.CheckOutside("--out", c.Out, inputs); err != nil {
		return err
	}
	cfg, err := decoder.ReadConfig(dir)
	if err != nil {
		return fmt.Errorf("--model %s: %w", c.Model, err)
	}
	if _, err := gguf.ExportArch(cfg); err != nil {
		return fmt.Errorf("--model %s: %w", c.Model, err)
	}
	mctx, cfg, _, err := loadMerged(dir, c.Adapter)
	if err != nil {
		return err
	}
	tok := dir
	if c.Adapter != "" {
		if tok, err = mergeTokenizer(dir, cfg, c.Adapter); err != nil {
			return err
		}
	}
	weights, err := decoder.ExportWeights(mctx, cfg, "F32")
	if err != nil {
		return err
	}
	res, err := gguf.Export(c.Out, cfg, weights, gguf.ExportOptions{Type: c.Type, TokenizerDir: tok, Name: filepath.Base(filepath.Clean(c.Model))})
	if err != nil {
		return fmt.Errorf("--model %s: %w", c.Model, err)
	}
	var counts []string
	for t, n := range res.Types {
		counts = append(counts, fmt.Sprintf("%s×%d", t, n))
	}
	slices.Sort(counts)
	fmt.Fprintf(w, "wrote %s: architecture %s, --type %s, %d tensors (%s)", c.Out, res.Arch, c.Type, res.Tensors, strings.Join(counts, " "))
	if n := len(res.Fallbacks); n > 0 {
		names := strings.Join(res.Fallbacks[:min(n, 3)], ", ")
		if n > 3 {
			names += ", …"
		}
		fmt.Fprintf(w, "; %d with rows that are not whole blocks fell back as llama.cpp does (%s)", n, names)
	}
	fmt.Fprintln(w)
	return writeModelfile(c.Out, res, w)
}

// writeModelfile writes the ollama Modelfile beside out (through a temporary file) and says which
// template it has, or that the chat template has no known ollama form.
func writeModelfile(out string, res *gguf.Exported, w io.Writer) error {
	text, family, known := gguf.Modelfile(filepath.Base(out), res)
	path := filepath.Join(filepath.Dir(out), "Modelfile")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	stops := strings.Join(res.Stops, " ")
	switch {
	case known:
		_, err := fmt.Fprintf(w, "wrote %s: TEMPLATE for the %s chat template, stop %s (ollama create NAME -f %s)\n", path, family, stops, path)
		return err
	case res.Template == "":
		_, err := fmt.Fprintf(w, "wrote %s without TEMPLATE: the model has no chat template (stop %s)\n", path, stops)
		return err
	}
	_, err := fmt.Fprintf(w, "wrote %s without TEMPLATE: the chat template has no known ollama form (known: ChatML, Llama 3, Gemma); ollama will pick a template from the GGUF's tokenizer.chat_template or use none. Stop %s\n", path, stops)
	return err
}
