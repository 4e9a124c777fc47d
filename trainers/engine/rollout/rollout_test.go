package rollout

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/trainers/engine/loop"
)

// TestLayoutByLength: GRPO's layout, written out by hand (TRL grpo_trainer.py L1379-1384):
// id 0 in the padding, attention on the prompt and the completion, HF's positions (pads 1).
func TestLayoutByLength(t *testing.T) {
	l := Layout{PromptLen: 3, CompletionLen: 3}
	got, err := l.Sequences([][]int32{{7, 8}, {5, 6, 9}}, [][]int32{{4}, {2, 0, 3}})
	if err != nil {
		t.Fatal(err)
	}
	want := Sequences[any]{
		IDs:  [][]int32{{0, 7, 8, 4, 0, 0}, {5, 6, 9, 2, 0, 3}},
		Attn: [][]int32{{0, 1, 1, 1, 0, 0}, {1, 1, 1, 1, 1, 1}},
		Pos:  [][]int32{{1, 0, 1, 2, 1, 1}, {0, 1, 2, 3, 4, 5}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sequences = %v, want %v", got, want)
	}
}

// TestLayoutByID: PPO's layout as TRL's forward() feeds it: padding with pad_token_id, attention =
// ids ≠ pad (a generated pad too), the pads' ids 0, positions the exclusive cumsum.
func TestLayoutByID(t *testing.T) {
	l := Layout{PromptLen: 3, CompletionLen: 4, Pad: 9, ByID: true}
	got, err := l.Sequences([][]int32{{7, 8}}, [][]int32{{4, 9, 5}})
	if err != nil {
		t.Fatal(err)
	}
	want := Sequences[any]{
		IDs:  [][]int32{{0, 7, 8, 4, 0, 5, 0}},
		Attn: [][]int32{{0, 1, 1, 1, 0, 1, 0}},
		Pos:  [][]int32{{0, 0, 1, 2, 3, 3, 4}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sequences = %v, want %v", got, want)
	}
	if _, err := l.Sequences([][]int32{{1, 2, 3, 4}}, [][]int32{{1}}); err == nil {
		t.Error("a prompt longer than PromptLen was laid out")
	}
	if _, err := l.Sequences([][]int32{{1}}, [][]int32{{1, 2, 3, 4, 5}}); err == nil {
		t.Error("a completion longer than CompletionLen was laid out")
	}
}

// TestCursor: the RepeatSampler cursor runs through an epoch into the next; the drop_last one
// starts a new epoch when fewer than a batch remain; a cursor sought to a saved position goes on
// as the straight one.
func TestCursor(t *testing.T) {
	const n, seed = 5, 3
	e0, e1 := loop.Order(n, seed, 0), loop.Order(n, seed, 1)
	c := NewCursor(n, seed)
	if got := append(c.Next(3, false), c.Next(3, false)...); !slices.Equal(got, append(slices.Clone(e0), e1[0])) {
		t.Errorf("RepeatSampler cursor: %v, want epoch 0 %v then %v", got, e0, e1[:1])
	}
	if c.Epoch != 1 || c.Offset != 1 {
		t.Errorf("position (%d, %d), want (1, 1)", c.Epoch, c.Offset)
	}
	d := NewCursor(n, seed)
	if got := append(d.Next(3, true), d.Next(3, true)...); !slices.Equal(got, append(slices.Clone(e0[:3]), e1[:3]...)) {
		t.Errorf("drop_last cursor: %v, want %v then %v", got, e0[:3], e1[:3])
	}
	straight, resumed := NewCursor(n, seed), NewCursor(n, seed)
	straight.Next(4, false)
	resumed.Seek(straight.Epoch, straight.Offset)
	if a, b := straight.Next(7, false), resumed.Next(7, false); !slices.Equal(a, b) {
		t.Errorf("after Seek: %v, straight %v", b, a)
	}
}

// TestChunks: consecutive [lo,hi) of size rows, the last one shorter, an error stops the walk.
func TestChunks(t *testing.T) {
	var got [][2]int
	if err := Chunks(7, 3, func(lo, hi int) error { got = append(got, [2]int{lo, hi}); return nil }); err != nil {
		t.Fatal(err)
	}
	if want := [][2]int{{0, 3}, {3, 6}, {6, 7}}; !slices.Equal(got, want) {
		t.Errorf("Chunks(7, 3) = %v, want %v", got, want)
	}
	stop := errors.New("stop")
	calls := 0
	if err := Chunks(7, 3, func(int, int) error { calls++; return stop }); !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Chunks after an error: %v, %d calls", err, calls)
	}
}

// TestLoadRows: prompt-only rows load; another format is refused naming the file and the trainer.
func TestLoadRows(t *testing.T) {
	dir := t.TempDir()
	ok, pref := filepath.Join(dir, "p.jsonl"), filepath.Join(dir, "pref.jsonl")
	if err := os.WriteFile(ok, []byte(`{"prompt": "2*3="}`+"\n"+`{"prompt": "4*5="}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pref, []byte(`{"prompt": "2*3=", "chosen": "6", "rejected": "5"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := LoadRows(ok, data.ReadOptions{}, "GRPO")
	if err != nil || len(rows) != 2 {
		t.Fatalf("LoadRows(%s) = %d rows, %v; want 2", ok, len(rows), err)
	}
	if _, err := LoadRows(pref, data.ReadOptions{}, "PPO"); err == nil || !strings.Contains(err.Error(), pref) || !strings.Contains(err.Error(), "PPO needs prompt-only rows") {
		t.Errorf("LoadRows(preference file) = %v, want the file and PPO named", err)
	}
}
