package main

// `posttrain export gguf --model DIR --out FILE.gguf --type f16|bf16|q8_0|q4_k_m [--adapter DIR]`:
// a trained checkpoint (or a base with a LoRA adapter merged as `posttrain merge` merges it) as a
// llama.cpp GGUF with its tokenizer and chat template, and an ollama Modelfile beside it.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	Overwrite                 bool // replace an existing --out and its Modelfile
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
				"An ollama Modelfile (FROM, TEMPLATE for ChatML, Llama 3 and Gemma templates, PARAMETER stop)\n" +
				"is written beside --out, named after it (NAME.gguf: NAME.Modelfile). Both are written whole\n" +
				"or not at all; an existing one is replaced only with --overwrite, and neither may be or lie\n" +
				"inside what the command reads.",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "model", Required: true, Usage: "checkpoint directory or HuggingFace repo id"},
				&cli.StringFlag{Name: "out", Required: true, Usage: "GGUF file to write (written whole or not at all); the Modelfile goes beside it"},
				&cli.StringFlag{Name: "type", Value: "f16", Usage: "tensor type: " + strings.Join(gguf.ExportTypeNames, ", ")},
				&cli.StringFlag{Name: "adapter", Usage: "PEFT LoRA adapter directory to merge in first (as posttrain merge does)"},
				&cli.BoolFlag{Name: "overwrite", Usage: "replace an existing --out file and its Modelfile"},
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() > 0 {
					return usageError{fmt.Errorf("%s: unexpected argument %q", cmd.FullName(), cmd.Args().First())}
				}
				c := exportConfig{Model: cmd.String("model"), Adapter: cmd.String("adapter"), Out: cmd.String("out"), Type: cmd.String("type"),
					Overwrite: cmd.Bool("overwrite")}
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
	modelfile, err := checkExportOutputs(c)
	if err != nil {
		return err
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
	// What the command reads: the checkpoint (for a GGUF --model, its conversion and the user's
	// file behind it), the adapter.
	inputs := []checkpoint.Input{{Name: "the model (--model)", Path: dir}, {Name: "the adapter (--adapter)", Path: c.Adapter}}
	if st, err := os.Stat(c.Model); err == nil && st.Mode().IsRegular() {
		inputs = append(inputs, checkpoint.Input{Name: "the model file (--model)", Path: c.Model})
	}
	for _, o := range []struct{ what, path string }{{"--out", c.Out}, {"the Modelfile", modelfile}} {
		if err := checkpoint.CheckFileOutside(o.what, o.path, inputs); err != nil {
			return err
		}
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
	// Both files are written under temporary names beside --out and renamed into place once both
	// are whole, so a failure leaves neither.
	tmpGGUF, err := tempName(c.Out)
	if err != nil {
		return fmt.Errorf("--out %s: %w", c.Out, err)
	}
	defer os.Remove(tmpGGUF)
	res, err := gguf.Export(tmpGGUF, cfg, weights, gguf.ExportOptions{Type: c.Type, TokenizerDir: tok, Name: filepath.Base(filepath.Clean(c.Model))})
	if err != nil {
		return fmt.Errorf("--model %s: %w", c.Model, err)
	}
	text, family, known := gguf.Modelfile(filepath.Base(c.Out), res)
	tmpModelfile, err := tempName(modelfile)
	if err != nil {
		return fmt.Errorf("%s: %w", modelfile, err)
	}
	defer os.Remove(tmpModelfile)
	if err := writeFileSynced(tmpModelfile, []byte(text)); err != nil {
		return fmt.Errorf("%s: %w", modelfile, err)
	}
	if err := os.Rename(tmpGGUF, c.Out); err != nil {
		return fmt.Errorf("--out %s: %w", c.Out, err)
	}
	if err := os.Rename(tmpModelfile, modelfile); err != nil {
		os.Remove(c.Out)
		return fmt.Errorf("%s: %w (the GGUF is not left at --out either)", modelfile, err)
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
	return sayModelfile(w, modelfile, res, family, known)
}

// modelfileFor is the ollama Modelfile written beside a GGUF: NAME.gguf's is NAME.Modelfile.
func modelfileFor(out string) string {
	return strings.TrimSuffix(out, filepath.Ext(out)) + ".Modelfile"
}

// checkExportOutputs refuses, before anything is read or written, an --out that is empty, whose
// directory does not exist, or that is not a regular file (a directory, a device, a symbolic
// link), and an existing --out or Modelfile without --overwrite. It returns the Modelfile's path.
func checkExportOutputs(c exportConfig) (string, error) {
	if strings.TrimSpace(c.Out) == "" {
		return "", fmt.Errorf("--out is empty: give the GGUF file to write")
	}
	if st, err := os.Stat(filepath.Dir(c.Out)); err != nil || !st.IsDir() {
		return "", fmt.Errorf("--out %s: its directory %s does not exist", c.Out, filepath.Dir(c.Out))
	}
	modelfile := modelfileFor(c.Out)
	for _, o := range []struct{ what, path string }{{"--out", c.Out}, {"the Modelfile", modelfile}} {
		st, err := os.Lstat(o.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return "", fmt.Errorf("%s %s: %w", o.what, o.path, err)
		case st.IsDir():
			return "", fmt.Errorf("%s %s is a directory; give the GGUF file's path", o.what, o.path)
		case st.Mode()&fs.ModeSymlink != 0:
			return "", fmt.Errorf("%s %s is a symbolic link: give the path of the file itself", o.what, o.path)
		case !st.Mode().IsRegular():
			return "", fmt.Errorf("%s %s is not a regular file (%s)", o.what, o.path, st.Mode().Type())
		case !c.Overwrite:
			return "", fmt.Errorf("%s %s exists: pass --overwrite to replace it", o.what, o.path)
		}
	}
	return modelfile, nil
}

// tempName is a new, unique, hidden name beside path for a file to be renamed to path.
func tempName(path string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", err
	}
	return name, nil
}

// writeFileSynced replaces the file at path with data, flushed to the disk.
func writeFileSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// sayModelfile says which template the Modelfile has, or that the chat template has no known
// ollama form.
func sayModelfile(w io.Writer, path string, res *gguf.Exported, family string, known bool) error {
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
