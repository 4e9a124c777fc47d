// Package hub resolves a --model argument, a local directory or a HuggingFace repo id such as
// Qwen/Qwen2.5-0.5B-Instruct, to a local checkpoint directory.
//
// Repo ids are downloaded with github.com/gomlx/go-huggingface's hub into the cache layout
// huggingface_hub (Python) shares: <cache>/models--Org--Name/{blobs,snapshots/<commit>,refs/main}.
// That library ignores HF_HOME, HF_HUB_CACHE, HF_TOKEN and offline mode, so this package reads
// them itself; see Options.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Options say where and how to fetch a repo; the zero value follows the environment like
// huggingface_hub does.
type Options struct {
	CacheDir string       // default DefaultCacheDir(): $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub
	Token    string       // default DefaultToken(): $HF_TOKEN, else the token file
	Endpoint string       // default $HF_ENDPOINT, else https://huggingface.co
	Revision string       // branch, tag or commit; default "main"
	Offline  bool         // never touch the network; also on when OfflineFromEnv()
	Logger   *slog.Logger // default slog.Default()
}

// withDefaults fills the unset fields from the environment.
func (o Options) withDefaults() Options {
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.Token == "" {
		o.Token = DefaultToken()
	}
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://huggingface.co"
	}
	o.Endpoint = strings.TrimSuffix(o.Endpoint, "/")
	if o.Revision == "" {
		o.Revision = "main"
	}
	o.Offline = o.Offline || OfflineFromEnv()
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Resolve returns the local directory holding model's files. An existing directory is returned
// as is. A repo id is looked up in the cache when offline; online, config.json,
// generation_config.json (if the repo has it), tokenizer.json, tokenizer_config.json and the
// safetensors weights (one file, or the index and its shards) are downloaded into the cache, and
// if that fails (network unreachable, server error, ctx done) a complete cached snapshot is used
// with a warning. Errors are one line.
func Resolve(ctx context.Context, model string, opts Options) (string, error) {
	if model == "" {
		return "", errors.New("model: empty name (want a directory or a HuggingFace repo id)")
	}
	if st, err := os.Stat(model); err == nil {
		if !st.IsDir() {
			return "", fmt.Errorf("model %s: is a file, not a checkpoint directory", model)
		}
		return filepath.Clean(model), nil
	}
	if !IsRepoID(model) {
		return "", fmt.Errorf("model %s: no such directory, and not a HuggingFace repo id (Org/Name)", model)
	}
	o := opts.withDefaults()
	if !revisionPattern.MatchString(o.Revision) || strings.Contains(o.Revision, "..") {
		return "", fmt.Errorf("model %s: invalid revision %q", model, o.Revision)
	}
	if o.Offline {
		dir, err := CachedSnapshot(o.CacheDir, model, o.Revision)
		if err != nil {
			return "", fmt.Errorf("model %s: offline mode is on (HF_HUB_OFFLINE) and no usable cached copy: %v", model, err)
		}
		return dir, nil
	}
	dir, dlErr := download(ctx, model, o)
	if dlErr == nil {
		return dir, nil
	}
	dlErr = errors.New(oneLine(dlErr.Error()) + authHint(dlErr, o.Token))
	cached, err := CachedSnapshot(o.CacheDir, model, o.Revision)
	if err != nil {
		return "", fmt.Errorf("model %s: download from %s failed (%v), and no usable cached copy: %v", model, o.Endpoint, dlErr, err)
	}
	o.Logger.Warn("hub download failed; using the cached snapshot", "model", model, "dir", cached, "err", dlErr)
	return cached, nil
}

// revisionPattern accepts branch and tag names (e.g. main, v1.0, refs/pr/1) and commit hashes.
var revisionPattern = regexp.MustCompile(`^[\w\-.]+(/[\w\-.]+)*$`)

// authHint explains the status codes the hub answers for a missing, private or gated repo.
func authHint(err error, token string) string {
	msg := err.Error()
	if !strings.Contains(msg, "code 401") && !strings.Contains(msg, "code 403") && !strings.Contains(msg, "code 404") {
		return ""
	}
	if token == "" {
		return "; if the repo is private or gated, set HF_TOKEN"
	}
	return "; check the repo id and that the token in use may read it"
}

// oneLine keeps an error message from a library on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
