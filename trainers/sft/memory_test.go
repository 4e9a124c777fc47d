package sft_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// SFT's tokenized examples live in a memory-mapped file, not on the Go heap: after New on 4,000
// rows of 500 tokens (2 M tokens, 10 MB as ids and loss masks on the heap), what New leaves on the
// heap is under a tenth of that, packed or not.
func TestSFT_ExamplesOffHeap(t *testing.T) {
	dir := looptest.Model(t)
	m := looptest.Load(t, dir, false)
	var b strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&b, `{"text": "%s"}`+"\n", strings.Repeat(fmt.Sprintf("%d ", i%10), 250))
	}
	p := filepath.Join(t.TempDir(), "text.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, packing := range []bool{false, true} {
		cfg := sft.DefaultConfig()
		cfg.MaxLength, cfg.Packing = 1024, packing
		d := looptest.Read(t, p)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tr, err := sft.New(m, d, cfg)
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		tokens := 0
		for i := range tr.NumExamples() {
			tokens += tr.Tokens(i)
		}
		kept := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		heapIfInMemory := float64(5 * tokens) // int32 ids and bool loss masks
		t.Logf("packing %v: %d examples, %d tokens; New left %.2f MB on the heap (the examples: %.1f MB)", packing, tr.NumExamples(), tokens, kept/(1<<20), heapIfInMemory/(1<<20))
		if tokens < 1_000_000 {
			t.Fatalf("%d tokens: the rows did not tokenize as expected", tokens)
		}
		if kept > heapIfInMemory/10 {
			t.Errorf("packing %v: New left %.2f MB on the heap, the examples are %.1f MB", packing, kept/(1<<20), heapIfInMemory/(1<<20))
		}
		runtime.KeepAlive(tr)
		runtime.KeepAlive(d)
	}
}

// Where $TMPDIR cannot take the examples' file, the examples stay in memory, the trainer works
// the same, and its Warnings say so and why.
func TestSFT_ExamplesInMemoryWithoutTMPDIR(t *testing.T) {
	dir := looptest.Model(t)
	m := looptest.Load(t, dir, false)
	p := filepath.Join(t.TempDir(), "text.jsonl")
	if err := os.WriteFile(p, []byte(`{"text": "1 2 3 4"}`+"\n"+`{"text": "5 6 7"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := looptest.Read(t, p)
	want, err := sft.New(m, d, sft.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", "/nonexistent/posttrain-tmp")
	tr, err := sft.New(m, d, sft.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if w := tr.Warnings(); len(w) != 1 || !strings.Contains(w[0], "/nonexistent/posttrain-tmp") || !strings.Contains(w[0], "held in memory") {
		t.Errorf("Warnings %q", w)
	}
	if tr.NumExamples() != want.NumExamples() || tr.Tokens(1) != want.Tokens(1) || tr.Items(0) != want.Items(0) {
		t.Errorf("in memory: %d examples, %d tokens; mapped: %d, %d", tr.NumExamples(), tr.Tokens(1), want.NumExamples(), want.Tokens(1))
	}
}
