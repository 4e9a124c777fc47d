package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

const datasetsDir = "../../data/testdata/datasets"

// Each trainer reads the TRL quick starts' dataset shapes as datasets writes them
// (scripts/reference/dataset_files.py): a Hub layout directory with a train split sliced and its
// test split evaluated on without --eval-dataset (TRL's dataset_test_split), split-named Parquet
// files, save_to_disk directories, a Parquet file, and a second config.
func TestTrain_DatasetLayouts(t *testing.T) {
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	run := func(name string, args ...string) string {
		t.Helper()
		out := filepath.Join(dir, name)
		args = append(args, "--model", model, "--output-dir", out, "--max-steps", "2", "--logging-steps", "1",
			"--per-device-train-batch-size", "2", "--gradient-checkpointing=false")
		if _, err := runCLI(t, args...); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return out
	}
	out := run("sft-capybara", "sft", "--dataset", filepath.Join(datasetsDir, "capybara"), "--dataset-train-split", "train[:2]",
		"--eval-strategy", "steps", "--eval-steps", "1", "--per-device-eval-batch-size", "1")
	var evalSteps []int
	for _, r := range metricsLines(t, out) {
		if _, ok := r.Metrics["eval_loss"]; ok {
			evalSteps = append(evalSteps, r.Step)
		}
	}
	if !slices.Equal(evalSteps, []int{1, 2}) {
		t.Errorf("eval lines at steps %v, want 1, 2 (the test split)", evalSteps)
	}
	run("dpo-ultrafeedback", "dpo", "--dataset", filepath.Join(datasetsDir, "ultrafeedback"))
	run("kto-saved-dict", "kto", "--dataset", filepath.Join(datasetsDir, "kto"), "--dataset-train-split", "train+test")
	run("sft-parquet", "sft", "--dataset", filepath.Join(datasetsDir, "tldr", "tldr.parquet"))
	run("sft-tools-config", "sft", "--dataset", filepath.Join(datasetsDir, "tools"), "--dataset-config", "plain")
	run("grpo-saved", "grpo", "--dataset", filepath.Join(datasetsDir, "deepmath"), "--reward-funcs", "think_format_reward",
		"--num-generations", "2", "--max-completion-length", "4")
	args, _ := os.ReadFile(filepath.Join(out, "training_args.yaml"))
	for _, k := range []string{"dataset_train_split: train[:2]", "dataset_test_split: test"} {
		if !strings.Contains(string(args), k) {
			t.Errorf("training_args.yaml lacks %q", k)
		}
	}
}

// A split, config or slice that the data does not have is one line naming the dataset and what
// it has.
func TestTrain_DatasetSplitErrors(t *testing.T) {
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--dataset", filepath.Join(datasetsDir, "capybara"), "--dataset-train-split", "validation"}, `capybara: config default has no split "validation" (it has train, test)`},
		{[]string{"--dataset", filepath.Join(datasetsDir, "tools"), "--dataset-config", "nope"}, `tools: no config "nope" (it has tools, plain)`},
		{[]string{"--dataset", filepath.Join(datasetsDir, "tldr", "tldr.parquet"), "--dataset-train-split", "test"}, `tldr.parquet: a single file is the split "train", not "test"`},
		{[]string{"--dataset", filepath.Join(datasetsDir, "tldr", "tldr.parquet"), "--dataset-train-split", "train[x:]"}, `split "train[x:]": want NAME or NAME[start:end]`},
		{[]string{"--dataset", filepath.Join(datasetsDir, "tldr", "tldr.parquet"), "--eval-strategy", "steps"}, `eval_strategy (--eval-strategy) steps needs an eval_dataset (--eval-dataset), or a dataset_name with a test split`},
		{[]string{"--dataset", filepath.Join(datasetsDir, "capybara"), "--eval-strategy", "steps", "--dataset-test-split", "validation"}, `eval_dataset: ../../data/testdata/datasets/capybara: config default has no split "validation"`},
	} {
		_, err := runCLI(t, append([]string{"sft", "--model", model, "--output-dir", filepath.Join(dir, "o"), "--max-steps", "1"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: error %v\nwant one line with %q", c.args, err, c.want)
		}
	}
}

// fakeDatasetHub serves local directories as Hub dataset repos (the two endpoints go-huggingface
// asks: the revision's commit and file list, and each file with its ETag) and points
// HF_ENDPOINT and HF_HOME at it; it returns the HF_HOME.
func fakeDatasetHub(t *testing.T, repos map[string]string) (hfHome string, requests *[]string) {
	t.Helper()
	const commit = "0123456789abcdef0123456789abcdef01234567"
	files := map[string]map[string][]byte{}
	for id, dir := range repos {
		files[id] = map[string][]byte{}
		err := filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			files[id][filepath.ToSlash(rel)] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	reqs := []string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reqs = append(reqs, r.Method+" "+r.URL.Path)
		mu.Unlock()
		for id, fs := range files {
			if r.URL.Path == "/api/datasets/"+id+"/revision/main" {
				var sib []map[string]string
				for name := range fs {
					sib = append(sib, map[string]string{"rfilename": name})
				}
				json.NewEncoder(w).Encode(map[string]any{"id": id, "sha": commit, "siblings": sib})
				return
			}
			name, ok := strings.CutPrefix(r.URL.Path, "/datasets/"+id+"/resolve/"+commit+"/")
			content, found := fs[name]
			if !ok || !found {
				continue
			}
			sum := sha256.Sum256(content)
			w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
			w.Header().Set("X-Repo-Commit", commit)
			w.Header().Set("Content-Length", fmt.Sprint(len(content)))
			if r.Method == http.MethodGet {
				w.Write(content)
			}
			return
		}
		http.Error(w, "not found", http.StatusNotFound)
	}))
	t.Cleanup(srv.Close)
	hfHome = filepath.Join(t.TempDir(), "hf")
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HOME", hfHome)
	t.Setenv("HF_HUB_OFFLINE", "")
	return hfHome, &reqs
}

// --dataset trl-lib/Capybara (a Hub dataset id) downloads the dataset repo's README.md and data
// files into the HuggingFace cache (datasets--trl-lib--Capybara) and trains on its train split,
// evaluating on its test split; a second run with HF_HUB_OFFLINE=1 reads the cached copy.
func TestTrain_HubDatasetID(t *testing.T) {
	hfHome, requests := fakeDatasetHub(t, map[string]string{"trl-lib/Capybara": filepath.Join(datasetsDir, "capybara")})
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	args := func(out string) []string {
		return []string{"sft", "--model", model, "--dataset_name", "trl-lib/Capybara", "--output-dir", filepath.Join(dir, out),
			"--max-steps", "1", "--per-device-train-batch-size", "2", "--eval-strategy", "steps", "--eval-steps", "1"}
	}
	if _, err := runCLI(t, args("online")...); err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(hfHome, "hub", "datasets--trl-lib--Capybara", "snapshots", "0123456789abcdef0123456789abcdef01234567")
	for _, name := range []string{"README.md", "data/train-00000-of-00001.parquet", "data/test-00000-of-00001.parquet"} {
		if _, err := os.Stat(filepath.Join(snap, filepath.FromSlash(name))); err != nil {
			t.Error(err)
		}
	}
	if len(*requests) == 0 {
		t.Fatal("the Hub was not asked")
	}
	t.Setenv("HF_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("HF_HUB_OFFLINE", "1")
	if _, err := runCLI(t, args("offline")...); err != nil {
		t.Fatalf("offline, from the cache: %v", err)
	}
}

// TRL's dataset mixture in a YAML config (`datasets:`, each entry's split and columns) is read in
// place of dataset_name and concatenated: 3 Capybara rows and 1 of the tools dataset's "plain"
// config make one epoch of 4 steps of 1.
func TestTrain_DatasetMixture(t *testing.T) {
	dir := t.TempDir()
	model := tinyGRPOModel(t, dir)
	abs, err := filepath.Abs(datasetsDir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "mix.yaml")
	yaml := "datasets:\n" +
		"  - path: " + filepath.Join(abs, "capybara") + "\n    split: train\n    columns: [messages]\n" +
		"  - path: " + filepath.Join(abs, "tools") + "\n    name: plain\n    columns: [messages]\n" +
		"streaming: false\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if _, err := runCLI(t, "sft", "--config", cfg, "--model", model, "--output-dir", out, "--num-train-epochs", "1",
		"--per-device-train-batch-size", "1", "--logging-steps", "1", "--gradient-checkpointing=false"); err != nil {
		t.Fatal(err)
	}
	recs := metricsLines(t, out)
	if len(recs) != 4 || recs[3].Epoch != 1 {
		t.Errorf("%d lines %v: want 4 steps ending epoch 1 (4 rows)", len(recs), recs)
	}
	for _, c := range []struct{ yaml, want string }{
		{"datasets:\n  - path: " + filepath.Join(abs, "capybara") + "\n    columns: [source]\n", `columns source leave out "text"`},
		{"datasets:\n  - path: x\n    data_files: a.json\n", "datasets[0].data_files: not supported"},
		{"datasets:\n  - name: x\n", "datasets[0]: no path"},
		{"dataset_name: a.jsonl\ndatasets:\n  - path: x\n", "dataset_name (--dataset) and datasets (a mixture) are both given: give one"},
		{"datasets:\n  - path: x\ntest_split_size: 0.1\n", "test_split_size: 0.1: posttrain draws no random test split"},
	} {
		if err := os.WriteFile(cfg, []byte(c.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := runCLI(t, "sft", "--config", cfg, "--model", model, "--output-dir", filepath.Join(dir, "bad"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.yaml, err, c.want)
		}
	}
}
