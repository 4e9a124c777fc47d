package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/posttrain/posttrain/models/decoder"
)

// resolveAdapter turns a --model that is a PEFT LoRA adapter directory (adapter_config.json and
// no config.json: posttrain's --use-peft output, or PEFT's save_pretrained) into a checkpoint: its
// base (adapter_config.json's base_model_name_or_path, a directory or a Hub id, resolved as any
// --model) with the adapter folded in (PEFT's merge_and_unload, as `posttrain merge` does), written
// once into the cache of converted models and reused while the adapter and the base are
// unchanged. ok is false for anything else.
func resolveAdapter(ctx context.Context, model string) (dir string, ok bool, err error) {
	cfgPath := filepath.Join(model, "adapter_config.json")
	if _, err := os.Stat(cfgPath); err != nil {
		return "", false, nil
	}
	if _, err := os.Stat(filepath.Join(model, "config.json")); err == nil {
		return "", false, nil // a checkpoint that also carries an adapter's config: the checkpoint
	}
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	var ac struct {
		Base *string `json:"base_model_name_or_path"`
	}
	if err := json.Unmarshal(raw, &ac); err != nil {
		return "", true, fmt.Errorf("model %s: adapter_config.json: %w", model, err)
	}
	if ac.Base == nil || *ac.Base == "" {
		return "", true, fmt.Errorf("model %s is a LoRA adapter whose adapter_config.json names no base_model_name_or_path: merge it with posttrain merge --model BASE --adapter %s", model, model)
	}
	if err := checkAdapterBase(*ac.Base); err != nil {
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	base, err := resolveModel(ctx, *ac.Base)
	if err != nil {
		return "", true, fmt.Errorf("model %s: its base: %w", model, err)
	}
	key, err := adapterKey(model, base)
	if err != nil {
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	cache, err := ggufCacheDir()
	if err != nil {
		return "", true, err
	}
	dir = filepath.Join(cache, "lora-"+key)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, true, nil
	}
	slog.Info("merging the LoRA adapter into its base (once; kept in the cache)", "adapter", model, "base", *ac.Base, "dir", dir)
	mctx, cfg, _, err := loadMerged(base, model)
	if err != nil {
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	tok, err := mergeTokenizer(base, cfg, model)
	if err != nil {
		return "", true, err
	}
	tmp := dir + fmt.Sprintf(".tmp-%d", os.Getpid())
	if err := decoder.Save(tmp, mctx, cfg, decoder.SaveOptions{DType: "float32", TokenizerPath: tok, BaseDir: base,
		WrittenBy: "posttrain --model " + model}); err != nil {
		os.RemoveAll(tmp)
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr == nil {
			return dir, true, nil // another process merged it meanwhile
		}
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	return dir, true, nil
}

// checkAdapterBase refuses a base that is itself an adapter directory (one level only).
func checkAdapterBase(base string) error {
	if _, err := os.Stat(filepath.Join(base, "adapter_config.json")); err == nil {
		if _, err := os.Stat(filepath.Join(base, "config.json")); err != nil {
			return fmt.Errorf("its base %s is a LoRA adapter too: merge that one first (posttrain merge)", base)
		}
	}
	return nil
}

// adapterKey identifies an adapter folded into a base: the adapter directory's files and the
// base directory's path and config.json.
func adapterKey(adapter, base string) (string, error) {
	h := sha256.New()
	for _, name := range []string{"adapter_config.json", "adapter_model.safetensors", "tokenizer.json", "tokenizer_config.json"} {
		f, err := os.Open(filepath.Join(adapter, name))
		if os.IsNotExist(err) && name != "adapter_config.json" {
			continue
		}
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s\n", name)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(base)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "base %s\n", abs)
	cfg, err := os.ReadFile(filepath.Join(base, "config.json"))
	if err != nil {
		return "", err
	}
	h.Write(cfg)
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}
