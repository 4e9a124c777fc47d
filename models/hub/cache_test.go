package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// isolate points every variable the package reads at t's temporary directory, so no test reads
// the developer's cache or token, or reaches the network (the endpoint refuses connections).
func isolate(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	for key, value := range map[string]string{
		"HF_HUB_CACHE": "", "HF_HOME": "", "HF_TOKEN": "", "HUGGING_FACE_HUB_TOKEN": "", "HF_TOKEN_PATH": "",
		"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "",
		"HF_ENDPOINT":    "http://127.0.0.1:1",
		"XDG_CACHE_HOME": filepath.Join(tmp, "xdg"),
		"HOME":           filepath.Join(tmp, "home"),
	} {
		t.Setenv(key, value)
	}
	return tmp
}

func TestDefaultCacheDir_EnvPrecedence(t *testing.T) {
	tmp := isolate(t)
	if got, want := DefaultCacheDir(), filepath.Join(tmp, "xdg", "huggingface", "hub"); got != want {
		t.Errorf("XDG_CACHE_HOME: got %s, want %s", got, want)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	if got, want := DefaultCacheDir(), filepath.Join(tmp, "home", ".cache", "huggingface", "hub"); got != want {
		t.Errorf("HOME: got %s, want %s", got, want)
	}
	t.Setenv("HF_HOME", "/hf")
	if got := DefaultCacheDir(); got != "/hf/hub" {
		t.Errorf("HF_HOME: got %s, want /hf/hub", got)
	}
	t.Setenv("HF_HUB_CACHE", "/cache")
	if got := DefaultCacheDir(); got != "/cache" {
		t.Errorf("HF_HUB_CACHE: got %s, want /cache", got)
	}
	t.Setenv("HF_HUB_CACHE", "~/c")
	if got, want := DefaultCacheDir(), filepath.Join(tmp, "home", "c"); got != want {
		t.Errorf("HF_HUB_CACHE=~/c: got %s, want %s", got, want)
	}
}

func TestDefaultToken_EnvThenTokenFile(t *testing.T) {
	tmp := isolate(t)
	if got := DefaultToken(); got != "" {
		t.Errorf("no token: got %q", got)
	}
	t.Setenv("HF_HOME", filepath.Join(tmp, "hf"))
	os.MkdirAll(filepath.Join(tmp, "hf"), 0o755)
	os.WriteFile(filepath.Join(tmp, "hf", "token"), []byte("hf_file\n"), 0o600)
	if got := DefaultToken(); got != "hf_file" {
		t.Errorf("$HF_HOME/token: got %q, want hf_file", got)
	}
	os.WriteFile(filepath.Join(tmp, "other"), []byte("hf_path"), 0o600)
	t.Setenv("HF_TOKEN_PATH", filepath.Join(tmp, "other"))
	if got := DefaultToken(); got != "hf_path" {
		t.Errorf("HF_TOKEN_PATH: got %q, want hf_path", got)
	}
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "hf_old")
	if got := DefaultToken(); got != "hf_old" {
		t.Errorf("HUGGING_FACE_HUB_TOKEN: got %q, want hf_old", got)
	}
	t.Setenv("HF_TOKEN", "hf_env")
	if got := DefaultToken(); got != "hf_env" {
		t.Errorf("HF_TOKEN: got %q, want hf_env", got)
	}
	// As huggingface_hub: a blank HF_TOKEN shadows HUGGING_FACE_HUB_TOKEN and leaves the file.
	t.Setenv("HF_TOKEN", " \n")
	if got := DefaultToken(); got != "hf_path" {
		t.Errorf("blank HF_TOKEN: got %q, want hf_path", got)
	}
	os.WriteFile(filepath.Join(tmp, "other"), []byte("\r\nhf_crlf\r\n"), 0o600)
	if got := DefaultToken(); got != "hf_crlf" {
		t.Errorf("token file with CRLF: got %q, want hf_crlf", got)
	}
}

func TestOfflineFromEnv(t *testing.T) {
	isolate(t)
	for value, want := range map[string]bool{"": false, "0": false, "false": false, "1": true, "true": true, "ON": true, "yes": true} {
		t.Setenv("HF_HUB_OFFLINE", value)
		if got := OfflineFromEnv(); got != want {
			t.Errorf("HF_HUB_OFFLINE=%q: got %v, want %v", value, got, want)
		}
	}
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("TRANSFORMERS_OFFLINE", "1")
	if !OfflineFromEnv() {
		t.Error("TRANSFORMERS_OFFLINE=1 not honoured")
	}
}

func TestIsRepoID(t *testing.T) {
	for id, want := range map[string]bool{
		"Qwen/Qwen2.5-0.5B-Instruct": true, "gpt2": true, "a/b_c.d": true,
		"": false, "a/b/c": false, "a--b/c": false, "../x": false, "/abs": false, "a/": false, "a b/c": false, "-a/b": false,
	} {
		if got := IsRepoID(id); got != want {
			t.Errorf("IsRepoID(%q) = %v, want %v", id, got, want)
		}
	}
}

const (
	commitA = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	commitB = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

// fakeSnapshot writes a snapshot the way huggingface_hub lays it out: files in blobs/, linked
// from snapshots/<commit>/ by relative symbolic links.
func fakeSnapshot(t *testing.T, cacheDir, repoID, commit string, files map[string]string) string {
	t.Helper()
	repoDir := RepoCacheDir(cacheDir, repoID)
	snap := filepath.Join(repoDir, "snapshots", commit)
	for name, content := range files {
		blob := filepath.Join(repoDir, "blobs", commit[:8]+"-"+strings.ReplaceAll(name, "/", "_"))
		must(t, os.MkdirAll(filepath.Dir(blob), 0o755))
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(snap, name)), 0o755))
		must(t, os.WriteFile(blob, []byte(content), 0o644))
		rel, _ := filepath.Rel(filepath.Dir(filepath.Join(snap, name)), blob)
		must(t, os.Symlink(rel, filepath.Join(snap, name)))
	}
	return snap
}

func setRef(t *testing.T, cacheDir, repoID, ref, commit string) {
	t.Helper()
	path := filepath.Join(RepoCacheDir(cacheDir, repoID), "refs", ref)
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.WriteFile(path, []byte(commit), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

var completeFiles = map[string]string{"config.json": "{}", "model.safetensors": "x", "tokenizer.json": "{}"}

func TestCachedSnapshot(t *testing.T) {
	const id = "Org/Tiny"
	t.Run("refs/main picks among snapshots", func(t *testing.T) {
		cache := t.TempDir()
		want := fakeSnapshot(t, cache, id, commitA, completeFiles)
		fakeSnapshot(t, cache, id, commitB, completeFiles)
		setRef(t, cache, id, "main", commitA+"\n")
		if got, err := CachedSnapshot(cache, id, "main"); err != nil || got != want {
			t.Errorf("got %s, %v; want %s", got, err, want)
		}
		if got, err := CachedSnapshot(cache, id, commitB); err != nil || filepath.Base(got) != commitB {
			t.Errorf("commit revision: got %s, %v", got, err)
		}
	})
	t.Run("single snapshot without refs", func(t *testing.T) {
		cache := t.TempDir()
		want := fakeSnapshot(t, cache, id, commitB, completeFiles)
		if got, err := CachedSnapshot(cache, id, "main"); err != nil || got != want {
			t.Errorf("got %s, %v; want %s", got, err, want)
		}
	})
	errCases := []struct {
		name  string
		setup func(cache string)
		want  string
	}{
		{"not cached", func(string) {}, "Org/Tiny is not in the HuggingFace cache"},
		{"two snapshots, no ref", func(cache string) {
			fakeSnapshot(t, cache, id, commitA, completeFiles)
			fakeSnapshot(t, cache, id, commitB, completeFiles)
		}, "2 snapshots and no refs/main"},
		{"ref to a missing snapshot", func(cache string) {
			fakeSnapshot(t, cache, id, commitA, completeFiles)
			setRef(t, cache, id, "main", commitB)
		}, "Org/Tiny@main is not in the HuggingFace cache"},
		{"bad ref", func(cache string) { setRef(t, cache, id, "main", "nope") }, `refs/main holds "nope"`},
		{"no weights", func(cache string) {
			fakeSnapshot(t, cache, id, commitA, map[string]string{"config.json": "{}"})
		}, "incomplete: no model.safetensors"},
		{"dangling blob link", func(cache string) {
			snap := fakeSnapshot(t, cache, id, commitA, completeFiles)
			target, _ := os.Readlink(filepath.Join(snap, "config.json"))
			os.Remove(filepath.Join(snap, target))
		}, "incomplete: no config.json"},
		{"missing shard", func(cache string) {
			fakeSnapshot(t, cache, id, commitA, map[string]string{
				"config.json":                      "{}",
				"model.safetensors.index.json":     `{"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`,
				"model-00001-of-00002.safetensors": "x",
			})
		}, "incomplete: no model-00002-of-00002.safetensors"},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			cache := t.TempDir()
			tc.setup(cache)
			_, err := CachedSnapshot(cache, id, "main")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
