package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/posttrain/posttrain/models/safetensors"
)

// fakeHub serves the two HuggingFace endpoints go-huggingface uses, on loopback:
// GET /api/models/<id>/revision/<rev> (the commit and file list) and HEAD/GET
// /<id>/resolve/<commit>/<file> (with the ETag that names the blob).
type fakeHub struct {
	t      *testing.T
	id     string
	commit string
	files  map[string][]byte
	token  string // required as "Bearer <token>" when set
	// granted gates the repo as the hub does: the revision info is public, a file request
	// without a token gets 401 and one with another token 403 (licence not accepted).
	granted string
	// datasets serves a dataset repo (/api/datasets/…, /datasets/<id>/resolve/…).
	datasets bool

	mu       sync.Mutex
	requests []string
}

func (h *fakeHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests = append(h.requests, r.Method+" "+r.URL.Path)
	h.mu.Unlock()
	if h.token != "" && r.Header.Get("Authorization") != "Bearer "+h.token {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if auth := r.Header.Get("Authorization"); h.granted != "" && !strings.HasPrefix(r.URL.Path, "/api/") && auth != "Bearer "+h.granted {
		status := http.StatusForbidden
		if auth == "" {
			status = http.StatusUnauthorized
		}
		w.Header().Set("X-Error-Message", "Access to model "+h.id+" is restricted.")
		http.Error(w, "gated", status)
		return
	}
	api, resolve := "/api/models/", "/"
	if h.datasets {
		api, resolve = "/api/datasets/", "/datasets/"
	}
	if r.URL.Path == api+h.id+"/revision/main" {
		info := map[string]any{"id": h.id, "sha": h.commit, "siblings": []map[string]string{}}
		for name := range h.files {
			info["siblings"] = append(info["siblings"].([]map[string]string), map[string]string{"rfilename": name})
		}
		json.NewEncoder(w).Encode(info)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, resolve+h.id+"/resolve/"+h.commit+"/")
	content, found := h.files[name]
	if !ok || !found {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	sum := sha256.Sum256(content)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
	w.Header().Set("X-Repo-Commit", h.commit)
	w.Header().Set("Content-Length", fmt.Sprint(len(content)))
	if r.Method == http.MethodGet {
		w.Write(content)
	}
}

func (h *fakeHub) count(prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range h.requests {
		if strings.HasPrefix(r, prefix) {
			n++
		}
	}
	return n
}

func tinyRepoFiles(t *testing.T) map[string][]byte {
	t.Helper()
	files := map[string][]byte{"tokenizer.json": []byte(`{"model":{}}`), "tokenizer_config.json": []byte(`{}`), "README.md": []byte("# tiny"),
		// newer transformers (and e.g. google/gemma-3-270m-it) keep the chat template in its own file
		"chat_template.jinja": []byte("{{ messages[0].content }}")}
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("../testdata/qwen2-tiny/model", name))
		must(t, err)
		files[name] = b
	}
	return files
}

func TestResolve_LocalDirectory(t *testing.T) {
	isolate(t)
	dir := t.TempDir()
	if got, err := Resolve(context.Background(), dir+"/", Options{}); err != nil || got != dir {
		t.Errorf("dir: got %q, %v", got, err)
	}
	file := filepath.Join(dir, "f")
	must(t, os.WriteFile(file, nil, 0o644))
	for model, want := range map[string]string{
		file:        "is a file",
		"./nope":    "no such directory, and not a HuggingFace repo id",
		"a/b/c":     "no such directory",
		"":          "empty name",
		"Org/Model": "download from http://127.0.0.1:1 failed",
	} {
		_, err := Resolve(context.Background(), model, Options{})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Resolve(%q): err = %v, want one line containing %q", model, err, want)
		}
	}
}

func TestResolve_DownloadsIntoHFCacheLayout(t *testing.T) {
	tmp := isolate(t)
	hub := &fakeHub{t: t, id: "Org/Tiny", commit: commitA, files: tinyRepoFiles(t), token: "hf_secret"}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", filepath.Join(tmp, "hf"))
	t.Setenv("HF_TOKEN", "hf_secret")
	ctx := context.Background()

	dir, err := Resolve(ctx, "Org/Tiny", Options{})
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(tmp, "hf", "hub", "models--Org--Tiny")
	if want := filepath.Join(repoDir, "snapshots", commitA); dir != want {
		t.Errorf("dir = %s, want %s", dir, want)
	}
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} {
		link, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || !strings.HasPrefix(link, "../../blobs/") {
			t.Errorf("%s: link %q, %v; want a link into ../../blobs/", name, link, err)
		}
		got, _ := os.ReadFile(filepath.Join(dir, name))
		if !bytes.Equal(got, hub.files[name]) {
			t.Errorf("%s: content differs", name)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "README.md")); err == nil {
		t.Error("README.md downloaded: only checkpoint files should be")
	}
	if ref, _ := os.ReadFile(filepath.Join(repoDir, "refs", "main")); string(ref) != commitA {
		t.Errorf("refs/main = %q, want %s", ref, commitA)
	}
	if _, err := safetensors.ReadModelDir(dir); err != nil {
		t.Errorf("downloaded weights: %v", err)
	}

	// Warm cache: the revision is refreshed but no file is fetched again.
	gets := hub.count("GET /Org/Tiny/resolve/")
	if again, err := Resolve(ctx, "Org/Tiny", Options{}); err != nil || again != dir {
		t.Errorf("second Resolve: %s, %v", again, err)
	}
	if n := hub.count("GET /Org/Tiny/resolve/"); n != gets {
		t.Errorf("warm cache fetched %d files again", n-gets)
	}

	// Offline: not a single request.
	t.Setenv("HF_HUB_OFFLINE", "1")
	before := hub.count("")
	if got, err := Resolve(ctx, "Org/Tiny", Options{}); err != nil || got != dir {
		t.Errorf("offline Resolve: %s, %v", got, err)
	}
	if n := hub.count(""); n != before {
		t.Errorf("offline Resolve made %d requests", n-before)
	}
	if _, err := Resolve(ctx, "Org/Other", Options{}); err == nil || !strings.Contains(err.Error(), "offline mode is on") {
		t.Errorf("offline, not cached: err = %v", err)
	}
}

func TestResolve_ShardedRepo(t *testing.T) {
	tmp := isolate(t)
	src, _, err := safetensors.ReadFile("../testdata/qwen2-tiny/model/model.safetensors")
	must(t, err)
	var list []*safetensors.Tensor
	for _, tt := range src {
		list = append(list, tt)
	}
	shardDir := filepath.Join(tmp, "shards")
	must(t, safetensors.WriteModelDir(shardDir, list, 300_000))
	files := map[string][]byte{}
	entries, _ := os.ReadDir(shardDir)
	for _, e := range entries {
		files[e.Name()], _ = os.ReadFile(filepath.Join(shardDir, e.Name()))
	}
	if len(files) < 3 {
		t.Fatalf("want at least two shards and an index, got %d files", len(files))
	}
	files["config.json"] = []byte("{}")
	hub := &fakeHub{t: t, id: "Org/Sharded", commit: commitB, files: files}
	srv := httptest.NewServer(hub)
	defer srv.Close()

	dir, err := Resolve(context.Background(), "Org/Sharded", Options{Endpoint: srv.URL, CacheDir: filepath.Join(tmp, "c")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := safetensors.ReadModelDir(dir)
	if err != nil || len(got) != len(src) {
		t.Errorf("sharded download: %d tensors, %v; want %d", len(got), err, len(src))
	}
}

func TestResolve_UnreachableFallsBackToCache(t *testing.T) {
	tmp := isolate(t)
	cache := filepath.Join(tmp, "cache")
	t.Setenv("HF_HUB_CACHE", cache)
	want := fakeSnapshot(t, cache, "Org/Tiny", commitA, completeFiles)
	setRef(t, cache, "Org/Tiny", "main", commitA)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))

	got, err := Resolve(context.Background(), "Org/Tiny", Options{Logger: logger})
	if err != nil || got != want {
		t.Fatalf("got %s, %v; want %s", got, err, want)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "using the cached snapshot") {
		t.Errorf("no warning logged: %q", logs.String())
	}

	// A done context abandons the download and falls back too.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := Resolve(ctx, "Org/Tiny", Options{Logger: logger, Endpoint: "http://127.0.0.1:1"}); err != nil || got != want {
		t.Errorf("cancelled ctx: got %s, %v", got, err)
	}

	// Not cached: one line naming the endpoint and the cache.
	_, err = Resolve(context.Background(), "Org/Missing", Options{Logger: logger})
	if err == nil || !strings.Contains(err.Error(), "download from http://127.0.0.1:1 failed") ||
		!strings.Contains(err.Error(), "not in the HuggingFace cache "+cache) || strings.Contains(err.Error(), "\n") {
		t.Errorf("err = %v", err)
	}
}

func TestResolve_ServerErrors(t *testing.T) {
	tmp := isolate(t)
	hub := &fakeHub{t: t, id: "Org/Tiny", commit: commitA, files: tinyRepoFiles(t), token: "hf_secret"}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	opts := Options{Endpoint: srv.URL, CacheDir: filepath.Join(tmp, "c")}

	_, err := Resolve(context.Background(), "Org/Tiny", opts) // no token
	if err == nil || !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "set HF_TOKEN") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no token: err = %v, want a one-line 401", err)
	}
	opts.Token = "hf_secret"
	delete(hub.files, "model.safetensors")
	_, err = Resolve(context.Background(), "Org/Tiny", opts)
	if err == nil || !strings.Contains(err.Error(), "only safetensors weights are supported") {
		t.Errorf("no weights: err = %v", err)
	}
	if _, err := Resolve(context.Background(), "Org/Tiny", Options{Revision: "../x", CacheDir: opts.CacheDir}); err == nil {
		t.Error("revision ../x accepted")
	}
}

// TestResolve_GatedRepo follows a gated repo such as meta-llama/Llama-3.2-1B-Instruct through the
// three answers the hub gives: 401 without a token, 403 with a token whose account has not
// accepted the licence, the files with one that has. The token never shows in an error or a log.
func TestResolve_GatedRepo(t *testing.T) {
	tmp := isolate(t)
	const id, good, other = "meta-llama/Llama-3.2-1B-Instruct", "hf_goodSECRET123", "hf_otherSECRET456"
	hub := &fakeHub{t: t, id: id, commit: commitA, files: tinyRepoFiles(t), granted: good}
	srv := httptest.NewServer(hub)
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", filepath.Join(tmp, "hf"))
	var logs bytes.Buffer
	opts := Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx := context.Background()
	check := func(name string, err error, want ...string) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", name)
		}
		msg := err.Error()
		for _, w := range append(want, id) {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: err = %q, want it to contain %q", name, msg, w)
			}
		}
		if strings.Contains(msg, "\n") || strings.Contains(msg, "SECRET") {
			t.Errorf("%s: err = %q: more than one line, or the token", name, msg)
		}
	}

	_, err := Resolve(ctx, id, opts)
	check("no token", err, "HTTP 401", "no token was sent", "set HF_TOKEN", "accept the licence on "+srv.URL+"/"+id)

	t.Setenv("HUGGING_FACE_HUB_TOKEN", other)
	_, err = Resolve(ctx, id, opts)
	check("token without access", err, "HTTP 403", "token sent (from HUGGING_FACE_HUB_TOKEN)", "accept the licence on "+srv.URL+"/"+id)
	t.Setenv("HUGGING_FACE_HUB_TOKEN", "")

	must(t, os.MkdirAll(filepath.Join(tmp, "hf"), 0o700))
	tokenFile := filepath.Join(tmp, "hf", "token")
	must(t, os.WriteFile(tokenFile, []byte(other+"\n"), 0o600))
	_, err = Resolve(ctx, id, opts)
	check("token file without access", err, "HTTP 403", "from the token file "+tokenFile)

	t.Setenv("HF_TOKEN", "bogus-SECRET")
	_, err = Resolve(ctx, id, opts)
	check("token file without access", err, "HTTP 403", "from HF_TOKEN")

	t.Setenv("HF_TOKEN", good)
	dir, err := Resolve(ctx, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(tmp, "hf", "hub", "models--meta-llama--Llama-3.2-1B-Instruct", "snapshots", commitA); dir != want {
		t.Errorf("dir = %s, want %s (the layout Qwen repos get)", dir, want)
	}
	if _, err := safetensors.ReadModelDir(dir); err != nil {
		t.Errorf("downloaded weights: %v", err)
	}

	// A refusal with a cached copy uses it, with a warning that names the refusal.
	cache := filepath.Join(tmp, "hf", "hub")
	other2 := fakeSnapshot(t, cache, "meta-llama/Llama-3.2-1B", commitB, completeFiles)
	setRef(t, cache, "meta-llama/Llama-3.2-1B", "main", commitB)
	hub2 := &fakeHub{t: t, id: "meta-llama/Llama-3.2-1B", commit: commitB, files: tinyRepoFiles(t), granted: good}
	srv2 := httptest.NewServer(hub2)
	defer srv2.Close()
	t.Setenv("HF_TOKEN", other)
	if got, err := Resolve(ctx, "meta-llama/Llama-3.2-1B", Options{Logger: opts.Logger, Endpoint: srv2.URL}); err != nil || got != other2 {
		t.Errorf("refused with a cached copy: %s, %v; want %s", got, err, other2)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "HTTP 403") {
		t.Errorf("no warning naming the 403: %q", logs.String())
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("a token was logged: %q", logs.String())
	}
}
