package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	hfhub "github.com/gomlx/go-huggingface/hub"

	"github.com/posttrain/posttrain/data"
)

// DatasetCacheDir is the cache folder of a dataset repo: <cache>/datasets--Org--Name, as
// huggingface_hub names it.
func DatasetCacheDir(cacheDir, repoID string) string {
	return filepath.Join(cacheDir, "datasets--"+strings.ReplaceAll(repoID, "/", "--"))
}

// datasetFile reports whether a repo file is one load_dataset reads: README.md (its configs) and
// the data files posttrain reads (data.IsDataFile).
func datasetFile(name string) bool { return name == "README.md" || data.IsDataFile(name) }

// DatasetFiles chooses what a dataset download fetches besides README.md: the data files that the
// split expressions Splits (train, train[:1000], train+test) of the config Config read
// (data.RepoSplitFiles: README.md's configs, else split-named files), so that the other configs
// and splits of a large repo stay on the Hub; no Splits fetches every data file.
type DatasetFiles struct {
	Config string
	Splits []string
}

// ResolveDataset returns the local path of a --dataset argument: an existing file or directory
// as it is; a Hub dataset id (Org/Name) as the snapshot directory of the dataset repo in the cache
// (<cache>/datasets--Org--Name/snapshots/<commit>), after downloading its README.md and the data
// files of want when online (and when that fails, a cached snapshot with a warning), from the
// cache alone when offline (HF_HUB_OFFLINE). Errors are one line.
func ResolveDataset(ctx context.Context, dataset string, want DatasetFiles, opts Options) (string, error) {
	if _, err := os.Stat(dataset); err == nil {
		return dataset, nil
	}
	if !IsRepoID(dataset) || !strings.Contains(dataset, "/") {
		return "", fmt.Errorf("dataset %s: no such file or directory, and not a Hub dataset id (Org/Name)", dataset)
	}
	o := opts.withDefaults()
	if !revisionPattern.MatchString(o.Revision) || strings.Contains(o.Revision, "..") {
		return "", fmt.Errorf("dataset %s: invalid revision %q", dataset, o.Revision)
	}
	repoDir := DatasetCacheDir(o.CacheDir, dataset)
	cached := func() (string, error) {
		return cachedSnapshot(o.CacheDir, repoDir, dataset, o.Revision, checkDatasetSnapshot)
	}
	if o.Offline {
		dir, err := cached()
		if err != nil {
			return "", fmt.Errorf("dataset %s: offline mode is on (HF_HUB_OFFLINE) and no usable cached copy: %v", dataset, err)
		}
		return dir, nil
	}
	type result struct {
		dir string
		err error
	}
	done := make(chan result, 1)
	go func() {
		dir, err := downloadDataset(dataset, want, o)
		done <- result{dir, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		r.err = fmt.Errorf("download of %s: %w", dataset, ctx.Err())
	}
	if r.err == nil {
		return r.dir, nil
	}
	msg := hideToken(oneLine(r.err.Error()), o.Token)
	dir, err := cached()
	if err != nil {
		return "", fmt.Errorf("dataset %s: download from %s failed (%s%s), and no usable cached copy: %v", dataset, o.Endpoint, msg, authHint(msg, o.Token), err)
	}
	o.Logger.Warn("hub download failed; using the cached snapshot", "dataset", dataset, "dir", dir, "err", msg)
	return dir, nil
}

// downloadDataset fetches README.md and the data files of want of the dataset repo at o.Revision.
func downloadDataset(id string, want DatasetFiles, o Options) (string, error) {
	repo := hfhub.New(id).WithType(hfhub.RepoTypeDataset).WithCacheDir(o.CacheDir).WithAuth(o.Token).
		WithEndpoint(o.Endpoint).WithRevision(o.Revision).WithProgressBar(false)
	repo.Verbosity = 0
	if err := repo.DownloadInfo(true); err != nil {
		return "", fmt.Errorf("repo info of %s: %w", id, err)
	}
	info := repo.Info()
	if !commitPattern.MatchString(info.CommitHash) {
		return "", fmt.Errorf("repo info of %s: commit %q is not a commit hash", id, info.CommitHash)
	}
	var all, names []string
	hasReadme := false
	for _, f := range info.Siblings {
		all = append(all, f.Name)
		hasReadme = hasReadme || f.Name == "README.md"
		if data.IsDataFile(f.Name) {
			names = append(names, f.Name)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("dataset %s@%s has no data files posttrain reads (Parquet, Arrow, JSON Lines, JSON, CSV); a dataset built by a loading script is not supported", id, info.CommitHash)
	}
	snapshot := filepath.Join(DatasetCacheDir(o.CacheDir, id), "snapshots", info.CommitHash)
	fetch := func(name string) (string, error) {
		if !isFile(filepath.Join(snapshot, filepath.FromSlash(name))) {
			o.Logger.Info("hub: downloading", "dataset", id, "file", name, "commit", info.CommitHash)
		}
		p, err := repo.DownloadFile(name)
		if err != nil {
			return "", fmt.Errorf("download %s from %s: %w", name, id, err)
		}
		return p, nil
	}
	var readme []byte
	if hasReadme {
		p, err := fetch("README.md")
		if err != nil {
			return "", err
		}
		if readme, err = os.ReadFile(p); err != nil {
			return "", fmt.Errorf("dataset %s: %w", id, err)
		}
	}
	if len(want.Splits) > 0 {
		sel, err := data.RepoSplitFiles(id+"@"+info.CommitHash, all, readme, want.Config, want.Splits...)
		if err != nil {
			return "", err
		}
		names = sel
	}
	for _, name := range names {
		if _, err := fetch(name); err != nil {
			return "", err
		}
	}
	if err := writeRef(DatasetCacheDir(o.CacheDir, id), o, info.CommitHash); err != nil {
		return "", err
	}
	return snapshot, checkDatasetSnapshot(snapshot)
}

// checkDatasetSnapshot verifies that a dataset snapshot holds a data file.
func checkDatasetSnapshot(dir string) error {
	found := false
	err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() && datasetFile(filepath.ToSlash(p)) && filepath.Base(p) != "README.md" {
			found = true
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil && !errors.Is(err, filepath.SkipAll) {
		return fmt.Errorf("hub cache: %w", err)
	}
	if !found {
		return fmt.Errorf("snapshot %s is incomplete: no data file", dir)
	}
	return nil
}
