package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"sync"
	"testing"
)

// goldenCase is one entry of testdata/golden.json (HuggingFace tokenizers 0.23.2).
type goldenCase struct {
	Cat       string `json:"cat"`
	Text      string `json:"text"`
	IDs       []int  `json:"ids"`
	IDsPlain  []int  `json:"ids_plain"`
	Decoded   string `json:"decoded"`
	IDsQwen25 []int  `json:"ids_qwen25"` // only where Qwen2.5's added tokens give other ids
	// IDsSpecial is transformers' default encode (AutoTokenizer, add_special_tokens=True).
	IDsSpecial []int `json:"ids_special"`
}

var (
	loadOnce sync.Once
	qwen3    *BPE
	golden   []goldenCase
	loadErr  error
)

// testTokenizer loads testdata/tokenizer.json.gz (Qwen3) and the golden cases once per test binary.
func testTokenizer(t testing.TB) (*BPE, []goldenCase) {
	t.Helper()
	loadOnce.Do(func() {
		qwen3, loadErr = Load("testdata/tokenizer.json.gz")
		if loadErr != nil {
			return
		}
		var g struct {
			Cases []goldenCase `json:"cases"`
		}
		data, err := os.ReadFile("testdata/golden.json")
		if err == nil {
			err = json.Unmarshal(data, &g)
		}
		golden, loadErr = g.Cases, err
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return qwen3, golden
}

func TestEncode_Golden(t *testing.T) {
	tok, cases := testTokenizer(t)
	if len(cases) != 415 {
		t.Fatalf("golden.json: %d cases, want 415", len(cases))
	}
	for i, c := range cases {
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Errorf("case %d (%s) Encode(%q)\n got %v\nwant %v", i, c.Cat, c.Text, got, c.IDs)
		}
		if got := tok.EncodePlain(c.Text); !slices.Equal(got, c.IDsPlain) {
			t.Errorf("case %d (%s) EncodePlain(%q)\n got %v\nwant %v", i, c.Cat, c.Text, got, c.IDsPlain)
		}
		if got := tok.EncodeSpecial(c.Text); !slices.Equal(got, c.IDsSpecial) || c.IDsSpecial == nil {
			t.Errorf("case %d (%s) EncodeSpecial(%q)\n got %v\nwant %v", i, c.Cat, c.Text, got, c.IDsSpecial)
		}
	}
}

func TestDecode_Golden(t *testing.T) {
	tok, cases := testTokenizer(t)
	for i, c := range cases {
		if got := tok.Decode(c.IDs, false); got != c.Decoded {
			t.Errorf("case %d (%s) Decode(%v) = %q, want %q", i, c.Cat, c.IDs, got, c.Decoded)
		}
		if got := tok.Decode(c.IDsPlain, false); got != c.Decoded {
			t.Errorf("case %d (%s) Decode(plain %v) = %q, want %q", i, c.Cat, c.IDsPlain, got, c.Decoded)
		}
	}
}

// Qwen2.5 has the same vocabulary and merges as Qwen3 but lacks the added tokens 151665-151668
// (<tool_response>, </tool_response>, <think>, </think>).
func TestEncode_GoldenQwen25(t *testing.T) {
	tok, cases := testTokenizer(t)
	q25, err := tok.WithoutAddedTokens(151665, 151666, 151667, 151668)
	if err != nil {
		t.Fatal(err)
	}
	differ := 0
	for i, c := range cases {
		want := c.IDs
		if c.IDsQwen25 != nil {
			want = c.IDsQwen25
			differ++
		}
		if got := q25.Encode(c.Text); !slices.Equal(got, want) {
			t.Errorf("case %d (%s) Qwen2.5 Encode(%q)\n got %v\nwant %v", i, c.Cat, c.Text, got, want)
		}
	}
	if differ == 0 {
		t.Error("golden.json has no ids_qwen25 case: the test cannot fail")
	}
	if got, want := q25.VocabSize(), 151665; got != want {
		t.Errorf("Qwen2.5 VocabSize = %d, want %d", got, want)
	}
}

// Encode is safe for concurrent use: goroutines sharing one tokenizer (and its word cache, here
// starting empty) get the golden ids. Run with -race to check the cache's locking.
func TestEncode_Concurrent(t *testing.T) {
	tok, cases := testTokenizer(t)
	fresh := *tok
	m := *tok.model
	m.cache = newWordCache()
	fresh.model = &m
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range cases {
				c := cases[(i+g*97)%len(cases)]
				if got := fresh.Encode(c.Text); !slices.Equal(got, c.IDs) {
					errs <- c.Text
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode(%q) differs from the golden ids", s)
	}
}
