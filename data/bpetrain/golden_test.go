package bpetrain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/tokenizer"
)

// golden is testdata/golden.json (testdata/README.md).
type golden struct {
	Corpora map[string]struct {
		SHA256 string      `json:"sha256"`
		Merges [][2]string `json:"merges"`
	} `json:"corpora"`
	DemoEncode []struct {
		Text string `json:"text"`
		IDs  []int  `json:"ids"`
	} `json:"demo_encode"`
}

func readGolden(t *testing.T) golden {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// The merges equal those HuggingFace's BpeTrainer learns on the same files (testdata/README.md).
func TestGolden_MatchesHuggingFace(t *testing.T) {
	g := readGolden(t)
	if len(g.Corpora) != 2 {
		t.Fatalf("golden.json has %d corpora, want 2", len(g.Corpora))
	}
	for name, want := range g.Corpora {
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(text)
			if got := hex.EncodeToString(sum[:]); got != want.SHA256 {
				t.Fatalf("sha256 %s, golden.json has %s: regenerate it (testdata/README.md)", got, want.SHA256)
			}
			tr, err := New(Config{VocabSize: 30000}) // HuggingFace's default trainer
			if err != nil {
				t.Fatal(err)
			}
			if err := tr.FeedLines(bytes.NewReader(text), name); err != nil {
				t.Fatal(err)
			}
			got := tr.Train().Merges
			for i := range min(len(got), len(want.Merges)) {
				if got[i] != want.Merges[i] {
					t.Fatalf("merge %d: got %q, HuggingFace %q", i, got[i], want.Merges[i])
				}
			}
			if len(got) != len(want.Merges) {
				t.Errorf("got %d merges, HuggingFace %d", len(got), len(want.Merges))
			}
		})
	}
}

// corpus_demo.txt is the demo corpus without its special tokens, so the golden covers DemoCorpus.
func TestGolden_DemoCorpusFile(t *testing.T) {
	texts, err := DemoCorpus()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(texts, "")
	for _, s := range Specials {
		want = strings.ReplaceAll(want, s, "")
	}
	got, err := os.ReadFile(filepath.Join("testdata", "corpus_demo.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("testdata/corpus_demo.txt differs from DemoCorpus without specials: rewrite it and regenerate golden.json (testdata/README.md)")
	}
}

// testdata/demo holds the demo tokenizer's tokenizer.json and tokenizer_config.json; training
// must give them byte for byte (UPDATE_GOLDEN=1 rewrites them: then regenerate golden.json).
func TestGolden_DemoFiles(t *testing.T) {
	_, res := demoDir(t)
	for name, build := range map[string]func() ([]byte, error){"tokenizer.json": res.TokenizerJSON, "tokenizer_config.json": res.ConfigJSON} {
		got, err := build()
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "demo", name)
		if os.Getenv("UPDATE_GOLDEN") != "" {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the demo tokenizer trained now; review with UPDATE_GOLDEN=1 and git diff", path)
		}
	}
}

// HuggingFace loads the demo tokenizer.json and gives the same ids as data/tokenizer.
func TestGolden_DemoEncodeMatchesHuggingFace(t *testing.T) {
	g := readGolden(t)
	tok, err := tokenizer.Load(filepath.Join("testdata", "demo"))
	if err != nil {
		t.Fatal(err)
	}
	if len(g.DemoEncode) < 500 {
		t.Fatalf("golden.json has %d demo_encode cases, want ≥ 500", len(g.DemoEncode))
	}
	for _, c := range g.DemoEncode {
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("%q: got %v, HuggingFace %v", c.Text, got, c.IDs)
		}
	}
}
