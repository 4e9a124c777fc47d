package main

// --model FILE.gguf and --model ollama:NAME[:TAG]: the GGUF converted once (float32, as `posttrain
// convert` writes it) into a cache directory, never next to the input (an ollama blob store is
// ollama's), and the cached checkpoint used from then on.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/internal/checkpoint"
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

// checkOutsideGGUFCache refuses an output (what, at out) that is, holds or lies inside the cache of
// converted GGUF files: a run writing (or, with overwrite_output_dir, clearing) there would
// destroy the conversion another run reads, or the one it reads itself.
func checkOutsideGGUFCache(what, out string) error {
	if out == "" {
		return nil
	}
	cache, err := ggufCacheDir()
	if err != nil {
		return nil // no cache, nothing to protect
	}
	return checkpoint.CheckFileOutside(what, out, []checkpoint.Input{{Name: "the cache of converted GGUF files", Path: cache}})
}

// loadTokenizer is tokenizer.Load, or for a GGUF file (or any path ending in .gguf) the tokenizer
// rebuilt from its tokenizer.* metadata as the conversion rebuilds it, with errors that name the
// file rather than a JSON parser's complaint about its bytes.
func loadTokenizer(path string) (*tokenizer.BPE, error) {
	if !strings.EqualFold(filepath.Ext(path), ".gguf") && !isGGUFFile(path) {
		return tokenizer.Load(path)
	}
	st, err := os.Stat(path)
	switch {
	case err != nil:
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	case st.IsDir():
		return tokenizer.Load(path)
	case !isGGUFFile(path):
		return nil, fmt.Errorf("tokenizer %s is not a GGUF file: it does not start with %q", path, gguf.Magic)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	defer f.Close()
	tj, tc, err := gguf.Tokenizer(f)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	dir, err := os.MkdirTemp("", "posttrain-gguf-tokenizer-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for name, data := range map[string][]byte{"tokenizer.json": tj, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: the tokenizer rebuilt from its metadata: %w", path, err)
	}
	return tok, nil
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

// converted maps each conversion directory this process read a GGUF --model through to the
// user's own name for it (the file, or ollama:NAME), so that an error says which file is at fault
// rather than a cache path the user never typed (userPaths).
var converted sync.Map

// userPaths replaces, in an error's text, every conversion directory this process used by the
// user's --model.
func userPaths(msg string) string {
	converted.Range(func(dir, model any) bool {
		d, m := dir.(string), model.(string)
		if strings.Contains(msg, d) {
			msg = strings.ReplaceAll(msg, d+string(filepath.Separator), m+": ")
			msg = strings.ReplaceAll(msg, d, m)
		}
		return true
	})
	return msg
}

// ggufFileKey names a GGUF file's conversion in the cache by the file's identity and content:
// where it is, its size, modification time and inode, and the sha256 of its first and last MiB
// (the header, metadata and tensor index, and the end of the data), so that a file replaced by
// another, even of the same size and time, is converted anew. Hashing the whole file would read
// gigabytes on every run.
func ggufFileKey(path string, st fs.FileInfo) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	const part = 1 << 20
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%d\x00%d\x00", abs, st.Size(), st.ModTime().UnixNano(), inode(st))
	if _, err := io.Copy(h, io.LimitReader(f, part)); err != nil {
		return "", err
	}
	if st.Size() > part {
		if _, err := f.Seek(max(part, st.Size()-part), io.SeekStart); err != nil {
			return "", err
		}
		if _, err := io.Copy(h, f); err != nil {
			return "", err
		}
	}
	return "file-" + hex.EncodeToString(h.Sum(nil)[:16]), nil
}

// inode is the file's inode number where the system has one, else 0.
func inode(st fs.FileInfo) uint64 {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return uint64(s.Ino)
	}
	return 0
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
	case strings.EqualFold(filepath.Ext(model), ".gguf") || isGGUFFile(model):
		st, err := os.Stat(model)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", true, fmt.Errorf("model %s: no such file", model)
		case err != nil:
			return "", true, fmt.Errorf("model %s: %w", model, err)
		case st.IsDir():
			return "", false, nil // a checkpoint directory whose name ends in .gguf
		case !st.Mode().IsRegular():
			return "", true, fmt.Errorf("model %s is not a regular file", model)
		case st.Size() == 0:
			return "", true, fmt.Errorf("model %s is empty, not a GGUF file", model)
		case !isGGUFFile(model):
			return "", true, fmt.Errorf("model %s is not a GGUF file: it does not start with %q", model, gguf.Magic)
		}
		path = model
		if key, err = ggufFileKey(model, st); err != nil {
			return "", true, fmt.Errorf("model %s: %w", model, err)
		}
	default:
		return "", false, nil
	}
	cache, err := ggufCacheDir()
	if err != nil {
		return "", true, err
	}
	dir = filepath.Join(cache, key)
	converted.Store(dir, model)
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
