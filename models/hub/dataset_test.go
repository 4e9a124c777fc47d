package hub

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Hub dataset id downloads README.md and the data files (not the rest of the repo) into
// huggingface_hub's layout for datasets, records refs/main, and resolves from the cache alone
// when offline or when the Hub cannot be reached.
func TestResolveDataset_HubLayoutAndOffline(t *testing.T) {
	tmp := t.TempDir()
	files := map[string][]byte{
		"README.md":                         []byte("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path: data/train-*\n---\n"),
		"data/train-00000-of-00001.parquet": []byte("PAR1 not really"),
		"data/test.jsonl.gz":                []byte("gz"),
		".gitattributes":                    []byte("*.parquet filter=lfs"),
		"scripts/make.py":                   []byte("print()"),
	}
	hub := &fakeHub{t: t, id: "trl-lib/Capybara", commit: commitA, files: files, datasets: true}
	srv := httptest.NewServer(hub)
	cache := filepath.Join(tmp, "hub")
	opts := Options{Endpoint: srv.URL, CacheDir: cache}
	dir, err := ResolveDataset(context.Background(), "trl-lib/Capybara", opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(cache, "datasets--trl-lib--Capybara", "snapshots", commitA); dir != want {
		t.Errorf("dir %s, want %s", dir, want)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if datasetFile(name) != (err == nil) {
			t.Errorf("%s: downloaded %v, want %v", name, err == nil, datasetFile(name))
		}
		if err == nil && string(got) != string(want) {
			t.Errorf("%s: %q", name, got)
		}
	}
	ref, err := os.ReadFile(filepath.Join(cache, "datasets--trl-lib--Capybara", "refs", "main"))
	if err != nil || string(ref) != commitA {
		t.Errorf("refs/main = %q, %v", ref, err)
	}
	srv.Close()
	for _, o := range []Options{{Endpoint: srv.URL, CacheDir: cache}, {Endpoint: srv.URL, CacheDir: cache, Offline: true}} {
		got, err := ResolveDataset(context.Background(), "trl-lib/Capybara", o)
		if err != nil || got != dir {
			t.Errorf("offline %v: %s, %v", o.Offline, got, err)
		}
	}
	if _, err := ResolveDataset(context.Background(), "trl-lib/Other", Options{CacheDir: cache, Offline: true}); err == nil ||
		!strings.Contains(err.Error(), "dataset trl-lib/Other: offline mode is on (HF_HUB_OFFLINE) and no usable cached copy") {
		t.Errorf("uncached offline: %v", err)
	}
	if _, err := ResolveDataset(context.Background(), "no/such/path.jsonl", opts); err == nil || !strings.Contains(err.Error(), "not a Hub dataset id") {
		t.Errorf("a missing file: %v", err)
	}
}

// A repo with no data file posttrain reads (a loading script) is one line saying so.
func TestResolveDataset_ScriptOnly(t *testing.T) {
	hub := &fakeHub{t: t, id: "org/scripted", commit: commitA, files: map[string][]byte{"scripted.py": []byte("x")}, datasets: true}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	_, err := ResolveDataset(context.Background(), "org/scripted", Options{Endpoint: srv.URL, CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "has no data files posttrain reads") {
		t.Errorf("error %v", err)
	}
}
