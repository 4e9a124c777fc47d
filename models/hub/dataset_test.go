package hub

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
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
	dir, err := ResolveDataset(context.Background(), "trl-lib/Capybara", DatasetFiles{}, opts)
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
		got, err := ResolveDataset(context.Background(), "trl-lib/Capybara", DatasetFiles{}, o)
		if err != nil || got != dir {
			t.Errorf("offline %v: %s, %v", o.Offline, got, err)
		}
	}
	if _, err := ResolveDataset(context.Background(), "trl-lib/Other", DatasetFiles{}, Options{CacheDir: cache, Offline: true}); err == nil ||
		!strings.Contains(err.Error(), "dataset trl-lib/Other: offline mode is on (HF_HUB_OFFLINE) and no usable cached copy") {
		t.Errorf("uncached offline: %v", err)
	}
	if _, err := ResolveDataset(context.Background(), "no/such/path.jsonl", DatasetFiles{}, opts); err == nil || !strings.Contains(err.Error(), "not a Hub dataset id") {
		t.Errorf("a missing file: %v", err)
	}
}

// A repo with no data file posttrain reads (a loading script) is one line saying so.
func TestResolveDataset_ScriptOnly(t *testing.T) {
	hub := &fakeHub{t: t, id: "org/scripted", commit: commitA, files: map[string][]byte{"scripted.py": []byte("x")}, datasets: true}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	_, err := ResolveDataset(context.Background(), "org/scripted", DatasetFiles{}, Options{Endpoint: srv.URL, CacheDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "has no data files posttrain reads") {
		t.Errorf("error %v", err)
	}
}

// A download fetches README.md and the data files of the config and splits the run reads, not the
// repo's other configs and splits: by README.md's configs, or by split-named files; a config or
// split the repo lacks is one line naming it, before any data file is fetched.
func TestResolveDataset_OnlyTheChosenConfigAndSplits(t *testing.T) {
	readme := "---\nconfigs:\n- config_name: all\n  default: true\n  data_files:\n  - split: train\n    path: all/train-*\n" +
		"  - split: test\n    path: all/test-*\n- config_name: fr\n  data_files:\n  - split: train\n    path: fr/train-*\n---\n"
	configs := map[string][]byte{
		"README.md":                        []byte(readme),
		"all/train-00000-of-00002.parquet": []byte("a0"),
		"all/train-00001-of-00002.parquet": []byte("a1"),
		"all/test-00000-of-00001.parquet":  []byte("at"),
		"fr/train-00000-of-00001.parquet":  []byte("f0"),
	}
	splitNamed := map[string][]byte{"train.jsonl": []byte("t"), "test.jsonl": []byte("e"), "validation.jsonl": []byte("v")}
	for _, c := range []struct {
		name  string
		files map[string][]byte
		want  DatasetFiles
		got   []string // the data files downloaded
		err   string
	}{
		{"the default config's train split", configs, DatasetFiles{Splits: []string{"train[:10]"}},
			[]string{"all/train-00000-of-00002.parquet", "all/train-00001-of-00002.parquet"}, ""},
		{"train and test", configs, DatasetFiles{Splits: []string{"train", "test"}},
			[]string{"all/train-00000-of-00002.parquet", "all/train-00001-of-00002.parquet", "all/test-00000-of-00001.parquet"}, ""},
		{"another config", configs, DatasetFiles{Config: "fr", Splits: []string{"train"}}, []string{"fr/train-00000-of-00001.parquet"}, ""},
		{"no such config", configs, DatasetFiles{Config: "de", Splits: []string{"train"}}, nil, `no config "de" (it has all, fr)`},
		{"no such split", configs, DatasetFiles{Config: "fr", Splits: []string{"train+test"}}, nil, `config fr has no split "test"`},
		{"split-named files", splitNamed, DatasetFiles{Splits: []string{"train+validation"}}, []string{"train.jsonl", "validation.jsonl"}, ""},
		{"every data file", splitNamed, DatasetFiles{}, []string{"test.jsonl", "train.jsonl", "validation.jsonl"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			hub := &fakeHub{t: t, id: "org/multi", commit: commitA, files: c.files, datasets: true}
			srv := httptest.NewServer(hub)
			defer srv.Close()
			cache := t.TempDir()
			dir, err := ResolveDataset(context.Background(), "org/multi", c.want, Options{Endpoint: srv.URL, CacheDir: cache})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error %v, want one line with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for name := range c.files {
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(name))); err == nil && name != "README.md" {
					got = append(got, name)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(c.got))
			if !slices.Equal(got, want) {
				t.Errorf("downloaded %v, want %v", got, want)
			}
		})
	}
}
