package sft

import (
	"math/rand/v2"
	"os"
	"reflect"
	"testing"
)

// The store gives back every example as it was added — ids, loss mask, segment ids when there
// are any, scored units and first-token flag — from its mapping, and leaves no file behind in the
// temporary directory once mapped.
func TestExampleStore_RoundTrip(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	rng := rand.New(rand.NewPCG(1, 2))
	var want []example
	for i := range 3000 {
		n := 1 + rng.IntN(40)
		ex := example{ids: make([]int32, n), scored: make([]bool, n), units: rng.IntN(50), first: i%3 == 0}
		for k := range n {
			ex.ids[k], ex.scored[k] = rng.Int32()-1<<30, rng.IntN(2) == 0
		}
		if i%2 == 0 {
			ex.seg = make([]int32, n)
			for k := range n {
				ex.seg[k] = int32(1 + k/7)
			}
		}
		want = append(want, ex)
	}
	for _, inMemory := range []bool{false, true} {
		s, err := newExampleStore(inMemory)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range want {
			if err := s.add(ex); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.finish(); err != nil {
			t.Fatal(err)
		}
		if !inMemory && (s.xmap == nil || s.mem != nil) {
			t.Fatal("the store is not mapped")
		}
		if s.len() != len(want) {
			t.Fatalf("%d examples, want %d", s.len(), len(want))
		}
		for i, w := range want {
			if got := s.at(i); !reflect.DeepEqual(got, w) {
				t.Fatalf("in memory %v: example %d = %+v, want %+v", inMemory, i, got, w)
			}
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("files left in the temporary directory: %v", left)
	}
}
