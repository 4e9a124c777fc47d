package decoder

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenizerFiles are the tokenizer files a HF checkpoint may carry; Save copies those present.
var TokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
	"added_tokens.json", "vocab.json", "merges.txt", "chat_template.jinja"}

// copyTokenizer copies the tokenizer at path (a directory, or a tokenizer.json[.gz] file and the
// files beside it) into dir, writing tokenizer.json uncompressed; its errors start with model
// (Config.errName).
func copyTokenizer(dir, path, model string) error {
	src, main, err := tokenizerSource(path, model)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(main)
	if err != nil {
		return fmt.Errorf("%s save tokenizer: %w", model, err)
	}
	if strings.HasSuffix(main, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("%s save tokenizer %s: %w", model, main, err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("%s save tokenizer %s: %w", model, main, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		return fmt.Errorf("%s save tokenizer: %w", model, err)
	}
	for _, name := range TokenizerFiles[1:] {
		data, err := os.ReadFile(filepath.Join(src, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
		}
		if err != nil {
			return fmt.Errorf("%s save tokenizer: %w", model, err)
		}
	}
	return nil
}

// tokenizerSource returns the directory of the tokenizer files and its tokenizer.json[.gz].
func tokenizerSource(path, model string) (dir, main string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("%s save tokenizer: %w", model, err)
	}
	if !st.IsDir() {
		return filepath.Dir(path), path, nil
	}
	for _, name := range []string{"tokenizer.json", "tokenizer.json.gz"} {
		if _, err := os.Stat(filepath.Join(path, name)); err == nil {
			return path, filepath.Join(path, name), nil
		}
	}
	return "", "", fmt.Errorf("%s save tokenizer: %s holds no tokenizer.json", model, path)
}
