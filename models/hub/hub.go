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
	"strconv"
	"strings"
)

// Options say where and how to fetch a repo; the zero value follows the environment like
// huggingface_hub does.
type Options struct {
	CacheDir string       // default DefaultCacheDir(): $HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub
	Token    string       // default DefaultToken(): $HF_TOKEN, $HUGGING_FACE_HUB_TOKEN, else the token file
	Endpoint string       // default $HF_ENDPOINT, else https://huggingface.co
	Revision string       // branch, tag or commit; default "main"
	Offline  bool         // never touch the network; also on when OfflineFromEnv()
	Logger   *slog.Logger // default slog.Default()

	tokenFrom string // where Token came from, for error messages: "Options.Token", a variable or a file
}

// withDefaults fills the unset fields from the environment.
func (o Options) withDefaults() Options {
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.Token != "" {
		o.tokenFrom = "Options.Token"
	} else {
		o.Token, o.tokenFrom = defaultToken()
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
	msg := hideToken(oneLine(dlErr.Error()), o.Token)
	if refused := accessRefused(model, msg, o); refused != "" {
		cached, err := CachedSnapshot(o.CacheDir, model, o.Revision)
		if err != nil {
			return "", fmt.Errorf("%s (no usable cached copy either: %v)", refused, err)
		}
		o.Logger.Warn("hub refused access; using the cached snapshot", "model", model, "dir", cached, "err", refused)
		return cached, nil
	}
	dlErr = errors.New(msg + authHint(msg, o.Token))
	cached, err := CachedSnapshot(o.CacheDir, model, o.Revision)
	if err != nil {
		return "", fmt.Errorf("model %s: download from %s failed (%v), and no usable cached copy: %v", model, o.Endpoint, dlErr, err)
	}
	o.Logger.Warn("hub download failed; using the cached snapshot", "model", model, "dir", cached, "err", dlErr)
	return cached, nil
}

// revisionPattern accepts branch and tag names (e.g. main, v1.0, refs/pr/1) and commit hashes.
var revisionPattern = regexp.MustCompile(`^[\w\-.]+(/[\w\-.]+)*$`)

// statusPattern finds the HTTP status in go-huggingface's errors: "bad status code 401: ..." from
// a GET and `... failed with the following message: "403 Forbidden"` from a HEAD.
var statusPattern = regexp.MustCompile(`bad status code (\d{3})\b|following message: "(\d{3}) `)

// httpStatus is the HTTP status named in a download error message, 0 when there is none.
func httpStatus(msg string) int {
	m := statusPattern.FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	code, _ := strconv.Atoi(m[1] + m[2])
	return code
}

// accessRefused turns a 401 or 403 from the hub into one line that names the repo, says whether
// a token was sent (and where it came from, never the token itself) and what to do; "" for any
// other error. The hub answers 401 to a request without a valid token for a gated or private repo,
// and 403 when the token's account has not been granted access to a gated repo (licence not
// accepted, or not yet approved).
func accessRefused(model, msg string, o Options) string {
	code := httpStatus(msg)
	if code != 401 && code != 403 {
		return ""
	}
	page := o.Endpoint + "/" + model
	if o.Token == "" {
		return fmt.Sprintf("model %s: %s refused access (HTTP %d) and no token was sent: the repository is gated or private; "+
			"set HF_TOKEN to a read token from %s/settings/tokens (or run `hf auth login`), and accept the licence on %s if it asks for it",
			model, o.Endpoint, code, o.Endpoint, page)
	}
	if code == 401 {
		return fmt.Sprintf("model %s: %s refused access (HTTP 401) to the token sent (from %s): the token is invalid or expired; "+
			"set HF_TOKEN to a valid read token from %s/settings/tokens", model, o.Endpoint, o.tokenFrom, o.Endpoint)
	}
	return fmt.Sprintf("model %s: %s refused access (HTTP 403) to the token sent (from %s): the repository is gated and this account "+
		"has no access yet; accept the licence on %s while logged in as the token's owner (and wait for approval), or use a token whose account has access",
		model, o.Endpoint, o.tokenFrom, page)
}

// authHint explains a 404, which the hub also answers for a private repo without a token.
func authHint(msg, token string) string {
	if httpStatus(msg) != 404 && !strings.Contains(msg, "code 404") {
		return ""
	}
	if token == "" {
		return "; if the repo is private or gated, set HF_TOKEN"
	}
	return "; check the repo id and that the token in use may read it"
}

// hideToken removes the token from a message, should a library ever put it there.
func hideToken(msg, token string) string {
	if token == "" {
		return msg
	}
	return strings.ReplaceAll(msg, token, "<HF token>")
}

// oneLine keeps an error message from a library on one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
