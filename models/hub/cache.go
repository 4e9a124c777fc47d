package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/posttrain/posttrain/models/safetensors"
)

// DefaultCacheDir is the HuggingFace hub cache that huggingface_hub (Python) uses:
// $HF_HUB_CACHE, else $HF_HOME/hub, else ${XDG_CACHE_HOME:-~/.cache}/huggingface/hub.
func DefaultCacheDir() string {
	if dir := os.Getenv("HF_HUB_CACHE"); dir != "" {
		return expandHome(dir)
	}
	return filepath.Join(hfHome(), "hub")
}

// hfHome is $HF_HOME, else ${XDG_CACHE_HOME:-~/.cache}/huggingface.
func hfHome() string {
	if dir := os.Getenv("HF_HOME"); dir != "" {
		return expandHome(dir)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(expandHome(cache), "huggingface")
}

// DefaultToken is the token huggingface_hub would send: $HF_TOKEN, else $HUGGING_FACE_HUB_TOKEN
// (its older name), else the token file ($HF_TOKEN_PATH, else $HF_HOME/token, which
// `hf auth login` writes); "" when there is none.
func DefaultToken() string {
	tok, _ := defaultToken()
	return tok
}

// defaultToken is DefaultToken and where the token came from (a variable name or the file's
// path), following huggingface_hub's utils/_auth.py: the first non-empty variable of HF_TOKEN and
// HUGGING_FACE_HUB_TOKEN is cleaned (line breaks removed, spaces trimmed) and, if that leaves
// nothing, the token file is read and cleaned the same way.
func defaultToken() (token, source string) {
	for _, key := range []string{"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"} {
		if v := os.Getenv(key); v != "" {
			if tok := cleanToken(v); tok != "" {
				return tok, key
			}
			break
		}
	}
	path := os.Getenv("HF_TOKEN_PATH")
	if path == "" {
		path = filepath.Join(hfHome(), "token")
	}
	path = expandHome(path)
	b, err := os.ReadFile(path)
	if err != nil {
		return "", ""
	}
	if tok := cleanToken(string(b)); tok != "" {
		return tok, "the token file " + path
	}
	return "", ""
}

// cleanToken is huggingface_hub's _clean_token: line breaks removed, surrounding spaces trimmed.
func cleanToken(s string) string {
	return strings.TrimSpace(strings.NewReplacer("\r", "", "\n", "").Replace(s))
}

// OfflineFromEnv reports whether HF_HUB_OFFLINE (or transformers' TRANSFORMERS_OFFLINE) is set to
// 1, true, yes or on, as huggingface_hub reads it.
func OfflineFromEnv() bool {
	for _, key := range []string{"HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"} {
		switch strings.ToUpper(strings.TrimSpace(os.Getenv(key))) {
		case "1", "TRUE", "YES", "ON":
			return true
		}
	}
	return false
}

func expandHome(path string) string {
	if path == "~" || strings.HasPrefix(path, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, path[1:])
		}
	}
	return path
}

// repoIDPattern is huggingface_hub's validate_repo_id: "name" or "namespace/name" of word
// characters, '-' and '.', at most 96 each.
var repoIDPattern = regexp.MustCompile(`^[\w\-.]{1,96}(/[\w\-.]{1,96})?$`)

// IsRepoID reports whether s is a valid HuggingFace repo id such as "Qwen/Qwen2.5-0.5B-Instruct".
func IsRepoID(s string) bool {
	return repoIDPattern.MatchString(s) && !strings.Contains(s, "--") && !strings.Contains(s, "..") &&
		!strings.HasPrefix(s, "-") && !strings.HasPrefix(s, ".") && !strings.HasSuffix(s, "-") && !strings.HasSuffix(s, ".")
}

// RepoCacheDir is the cache folder of a model repo: <cache>/models--Org--Name.
func RepoCacheDir(cacheDir, repoID string) string {
	return filepath.Join(cacheDir, "models--"+strings.ReplaceAll(repoID, "/", "--"))
}

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// CachedSnapshot finds the snapshot of repoID at revision in the cache without any network
// access: snapshots/<revision> for a commit hash, else the commit named by refs/<revision>,
// else the only snapshot there is. The snapshot must hold config.json and the weights.
func CachedSnapshot(cacheDir, repoID, revision string) (string, error) {
	return cachedSnapshot(cacheDir, RepoCacheDir(cacheDir, repoID), repoID, revision, checkSnapshot)
}

// cachedSnapshot is CachedSnapshot in the repo cache folder repoDir, checked with check.
func cachedSnapshot(cacheDir, repoDir, repoID, revision string, check func(dir string) error) (string, error) {
	if !IsRepoID(repoID) || strings.Contains(revision, "..") || revision == "" {
		return "", fmt.Errorf("hub cache: invalid repo id %q or revision %q", repoID, revision)
	}
	snapshots := filepath.Join(repoDir, "snapshots")
	var dir string
	if commitPattern.MatchString(revision) {
		dir = filepath.Join(snapshots, revision)
	} else if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", revision)); err == nil {
		commit := strings.TrimSpace(string(ref))
		if !commitPattern.MatchString(commit) {
			return "", fmt.Errorf("hub cache %s: refs/%s holds %q, not a commit hash", repoDir, revision, commit)
		}
		dir = filepath.Join(snapshots, commit)
	} else {
		entries, err := os.ReadDir(snapshots)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("hub cache: %w", err)
		}
		var found []string
		for _, e := range entries {
			if e.IsDir() {
				found = append(found, e.Name())
			}
		}
		switch len(found) {
		case 0:
			return "", fmt.Errorf("%s is not in the HuggingFace cache %s", repoID, cacheDir)
		case 1:
			dir = filepath.Join(snapshots, found[0])
		default:
			return "", fmt.Errorf("hub cache %s: %d snapshots and no refs/%s to choose one", repoDir, len(found), revision)
		}
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return "", fmt.Errorf("%s@%s is not in the HuggingFace cache %s (no %s)", repoID, revision, cacheDir, dir)
	}
	if err := check(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// checkSnapshot verifies that dir holds config.json and the weights: model.safetensors, or
// model.safetensors.index.json and every shard it names.
func checkSnapshot(dir string) error {
	missing := func(name string) error {
		return fmt.Errorf("snapshot %s is incomplete: no %s", dir, name)
	}
	if !isFile(filepath.Join(dir, "config.json")) {
		return missing("config.json")
	}
	if isFile(filepath.Join(dir, safetensors.SingleFileName)) {
		return nil
	}
	if !isFile(filepath.Join(dir, safetensors.IndexFileName)) {
		return missing(safetensors.SingleFileName)
	}
	idx, err := safetensors.ReadIndex(filepath.Join(dir, safetensors.IndexFileName))
	if err != nil {
		return err
	}
	for _, shard := range idx.Shards() {
		if !isFile(filepath.Join(dir, shard)) {
			return missing(shard)
		}
	}
	return nil
}

// isFile reports whether path is a regular file, following symbolic links (snapshot files link
// into blobs/; a dangling link is not a file).
func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
