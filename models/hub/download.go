package hub

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	hfhub "github.com/gomlx/go-huggingface/hub"

	"github.com/posttrain/posttrain/models/safetensors"
)

// Files fetched for a checkpoint besides the weights; the optional ones are skipped when the repo
// does not have them.
var (
	requiredFiles = []string{"config.json"}
	optionalFiles = []string{"generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}
)

// download fetches the checkpoint files of repoID into the cache and returns its snapshot
// directory. go-huggingface takes no context, so the download runs in a goroutine and a done ctx
// abandons it (it writes to temporary names under file locks, so the cache stays consistent).
func download(ctx context.Context, repoID string, o Options) (string, error) {
	type result struct {
		dir string
		err error
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("download of %s: %w", repoID, err)
	}
	done := make(chan result, 1)
	go func() {
		dir, err := downloadSync(repoID, o)
		done <- result{dir, err}
	}()
	select {
	case r := <-done:
		return r.dir, r.err
	case <-ctx.Done():
		return "", fmt.Errorf("download of %s: %w", repoID, ctx.Err())
	}
}

func downloadSync(repoID string, o Options) (string, error) {
	repo := hfhub.New(repoID).WithCacheDir(o.CacheDir).WithAuth(o.Token).WithEndpoint(o.Endpoint).
		WithRevision(o.Revision).WithProgressBar(false)
	repo.Verbosity = 0 // the library prints progress on stdout otherwise, which carries our JSON output
	if err := repo.DownloadInfo(true); err != nil {
		return "", fmt.Errorf("repo info of %s: %w", repoID, err)
	}
	info := repo.Info()
	if !commitPattern.MatchString(info.CommitHash) {
		return "", fmt.Errorf("repo info of %s: commit %q is not a commit hash", repoID, info.CommitHash)
	}
	var inRepo []string
	for _, f := range info.Siblings {
		inRepo = append(inRepo, f.Name)
	}
	names := append([]string(nil), requiredFiles...)
	for _, f := range optionalFiles {
		if slices.Contains(inRepo, f) {
			names = append(names, f)
		}
	}
	switch {
	case slices.Contains(inRepo, safetensors.SingleFileName):
		names = append(names, safetensors.SingleFileName)
	case slices.Contains(inRepo, safetensors.IndexFileName):
		names = append(names, safetensors.IndexFileName)
	default:
		return "", fmt.Errorf("repo %s@%s has no %s or %s (only safetensors weights are supported)", repoID, info.CommitHash, safetensors.SingleFileName, safetensors.IndexFileName)
	}
	paths, err := fetch(repo, o, info.CommitHash, names)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(paths[0])
	if names[len(names)-1] == safetensors.IndexFileName {
		idx, err := safetensors.ReadIndex(paths[len(paths)-1])
		if err != nil {
			return "", err
		}
		if _, err := fetch(repo, o, info.CommitHash, idx.Shards()); err != nil {
			return "", err
		}
	}
	// The library refreshes the revision once more before downloading: the snapshot it used names
	// the commit.
	if err := writeRef(RepoCacheDir(o.CacheDir, repoID), o, filepath.Base(dir)); err != nil {
		return "", err
	}
	if err := checkSnapshot(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// fetch downloads the files one at a time: go-huggingface v0.3.1's DownloadFiles updates its
// progress counters from several goroutines without a lock (a data race under -race), and one
// file at a time loses little, the weights being one or a few large files.
func fetch(repo *hfhub.Repo, o Options, commit string, names []string) ([]string, error) {
	snapshot := filepath.Join(RepoCacheDir(o.CacheDir, repo.ID), "snapshots", commit)
	paths := make([]string, len(names))
	for i, name := range names {
		if !isFile(filepath.Join(snapshot, filepath.FromSlash(name))) {
			o.Logger.Info("hub: downloading", "repo", repo.ID, "file", name, "commit", commit)
		}
		path, err := repo.DownloadFile(name)
		if err != nil {
			return nil, fmt.Errorf("download %s from %s: %w", name, repo.ID, err)
		}
		paths[i] = path
	}
	return paths, nil
}

// writeRef records refs/<revision> = commit in the repo's cache folder repoDir, as huggingface_hub
// does (go-huggingface does not), so an offline run finds the snapshot of the branch.
func writeRef(repoDir string, o Options, commit string) error {
	if commitPattern.MatchString(o.Revision) || !commitPattern.MatchString(commit) {
		return nil
	}
	path := filepath.Join(repoDir, "refs", filepath.FromSlash(o.Revision))
	if old, err := os.ReadFile(path); err == nil && string(old) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	tmp := fmt.Sprintf("%s.tmp-%d", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub cache: %w", err)
	}
	return nil
}
