package main

// --model FILE.gguf and --model ollama:NAME[:TAG]: the GGUF converted once (float32, as `posttrain
// convert` writes it) into a cache directory, never next to the input (an ollama blob store is
// ollama's), and the cached checkpoint used from then on.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/posttrain/posttrain/models/gguf"
)

// ggufCacheDir is where converted GGUFs are kept: $POSTTRAIN_GGUF_CACHE, else
// <user cache dir>/posttrain/gguf (~/.cache/posttrain/gguf on Linux).
func ggufCacheDir() (string, error) {
	if d := os.Getenv("POSTTRAIN_GGUF_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for converted GGUF files (set POSTTRAIN_GGUF_CACHE): %w", err)
	}
	return filepath.Join(base, "posttrain", "gguf"), nil
}

// isGGUFFile reports whether model names a regular file that starts with the GGUF magic.
func isGGUFFile(model string) bool {
	f, err := os.Open(model)
	if err != nil {
		return false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return false
	}
	var magic [4]byte
	_, err = f.Read(magic[:])
	return err == nil && string(magic[:]) == gguf.Magic
}

// resolveGGUF returns the checkpoint directory of a --model that is a GGUF file or an ollama
// model, converting it on first use, or ok false when model is neither.
func resolveGGUF(model string) (dir string, ok bool, err error) {
	var path, key string
	switch {
	case strings.HasPrefix(model, "ollama:"):
		models, err := gguf.OllamaModelsDir()
		if err != nil {
			return "", true, err
		}
		var digest string
		if path, digest, err = gguf.OllamaBlob(models, strings.TrimPrefix(model, "ollama:")); err != nil {
			return "", true, err
		}
		key = strings.ReplaceAll(digest, ":", "-") // content-addressed already
	case isGGUFFile(model):
		path = model
		abs, err := filepath.Abs(model)
		if err != nil {
			return "", true, err
		}
		st, err := os.Stat(model)
		if err != nil {
			return "", true, err
		}
		// The file's identity: where it is, its size and modification time (no need to hash GBs).
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", abs, st.Size(), st.ModTime().UnixNano()))
		key = "file-" + hex.EncodeToString(sum[:16])
	default:
		return "", false, nil
	}
	cache, err := ggufCacheDir()
	if err != nil {
		return "", true, err
	}
	dir = filepath.Join(cache, key)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		return dir, true, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	slog.Info("converting the GGUF to a checkpoint (once; kept in the cache)", "model", model, "dir", dir)
	if _, err := gguf.Convert(path, dir, gguf.ConvertOptions{WrittenBy: "posttrain --model " + model}); err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, "config.json")); statErr == nil {
			return dir, true, nil // another process converted it meanwhile
		}
		return "", true, fmt.Errorf("model %s: %w", model, err)
	}
	return dir, true, nil
}
