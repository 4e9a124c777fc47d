package gguf

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// OllamaModelType is the mediaType of the layer of an ollama manifest that holds the GGUF.
const OllamaModelType = "application/vnd.ollama.image.model"

// OllamaModelsDir is where ollama keeps its models: $OLLAMA_MODELS, else ~/.ollama/models.
func OllamaModelsDir() (string, error) {
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("ollama: no home directory for ~/.ollama/models: %w", err)
	}
	return filepath.Join(home, ".ollama", "models"), nil
}

var ollamaPart = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

// OllamaBlob finds the GGUF of the ollama model name ("NAME", "NAME:TAG", "NS/NAME:TAG" or
// "HOST/NS/NAME:TAG"; the tag defaults to latest, the namespace to library, the host to
// registry.ollama.ai) in the models directory dir, as ollama stores a pulled model:
// manifests/HOST/NS/NAME/TAG is a JSON manifest whose layer of mediaType OllamaModelType names
// the blob blobs/sha256-<hex>. It returns the blob's path and its digest ("sha256:<hex>").
// Layers posttrain cannot apply (a LoRA adapter, a vision projector) are refused.
func OllamaBlob(dir, name string) (path, digest string, err error) {
	ref, tag, _ := strings.Cut(name, ":")
	if tag == "" {
		tag = "latest"
	}
	parts := strings.Split(ref, "/")
	switch len(parts) {
	case 1:
		parts = []string{"registry.ollama.ai", "library", parts[0]}
	case 2:
		parts = append([]string{"registry.ollama.ai"}, parts...)
	}
	if len(parts) != 3 {
		return "", "", fmt.Errorf("ollama model %q: want NAME[:TAG], NS/NAME[:TAG] or HOST/NS/NAME[:TAG]", name)
	}
	for _, p := range append(parts, tag) {
		if !ollamaPart.MatchString(p) || strings.Contains(p, "..") {
			return "", "", fmt.Errorf("ollama model %q: %q is not a valid name part", name, p)
		}
	}
	manifest := filepath.Join(append(append([]string{dir, "manifests"}, parts...), tag)...)
	data, err := os.ReadFile(manifest)
	if err != nil {
		return "", "", fmt.Errorf("ollama model %q: %w (is it pulled? `ollama pull %s`)", name, err, name)
	}
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
			Digest    string `json:"digest"`
			Size      int64  `json:"size"`
		} `json:"layers"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return "", "", fmt.Errorf("ollama manifest %s: %w", manifest, err)
	}
	found := -1
	for i, l := range m.Layers {
		switch l.MediaType {
		case OllamaModelType:
			if found >= 0 {
				return "", "", fmt.Errorf("ollama manifest %s: more than one layer of mediaType %s", manifest, OllamaModelType)
			}
			found = i
		case "application/vnd.ollama.image.adapter", "application/vnd.ollama.image.projector":
			return "", "", fmt.Errorf("ollama manifest %s: layer %d of mediaType %s is not supported (only the model itself)", manifest, i, l.MediaType)
		}
	}
	if found < 0 {
		return "", "", fmt.Errorf("ollama manifest %s: no layer of mediaType %s", manifest, OllamaModelType)
	}
	l := m.Layers[found]
	hexDigest, ok := strings.CutPrefix(l.Digest, "sha256:")
	if !ok || !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(hexDigest) {
		return "", "", fmt.Errorf("ollama manifest %s: layer %d digest %q is not sha256:<64 hex digits>", manifest, found, l.Digest)
	}
	path = filepath.Join(dir, "blobs", "sha256-"+hexDigest)
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("ollama model %q: blob %w", name, err)
	}
	if st.Size() != l.Size {
		return "", "", fmt.Errorf("ollama blob %s: %d bytes, the manifest says %d", path, st.Size(), l.Size)
	}
	return path, l.Digest, nil
}
