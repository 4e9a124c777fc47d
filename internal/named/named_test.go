package named_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // GoMLX graph code reads best with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
)

// rows and batch are the kind of declaration a trainer makes: one generic struct for both sides.
type rows[T any] struct{ IDs, Pos, Mask T }

type batch[T any] struct {
	rows[T]           // embedded (even unexported): IDs, Pos, Mask
	Ref     T         // Ref
	KL      rows[T]   // named: KL.IDs, KL.Pos, KL.Mask
	Caches  []T       // Caches[0], Caches[1], …
	Sample  sample[T] // Sample.Temperature
}

type sample[T any] struct{ Temperature T }

// other names its inputs differently from batch: a host/graph mismatch.
type other[T any] struct {
	rows[T]
	RefLogProbs T
}

func fullBatch() batch[any] {
	return batch[any]{rows: rows[any]{IDs: 1, Pos: 2, Mask: 3}, Ref: 4, KL: rows[any]{IDs: 5, Pos: 6, Mask: 7},
		Caches: []any{8, 9}, Sample: sample[any]{Temperature: 10}}
}

// The order is the fields' declaration order, stable from call to call, and Bind reads the same
// struct back.
func TestOf_OrderIsTheFieldOrder(t *testing.T) {
	want := []string{"IDs", "Pos", "Mask", "Ref", "KL.IDs", "KL.Pos", "KL.Mask", "Caches[0]", "Caches[1]", "Sample.Temperature"}
	for range 3 {
		f := named.Of[any](fullBatch())
		if !slices.Equal(f.Names, want) {
			t.Fatalf("names %v, want %v", f.Names, want)
		}
		if got := fmt.Sprint(f.Values); got != "[1 2 3 4 5 6 7 8 9 10]" {
			t.Fatalf("values %s, want 1…10 in field order", got)
		}
		if back := named.Bind[batch[any]](f); fmt.Sprint(back) != fmt.Sprint(fullBatch()) {
			t.Errorf("Bind(Of(b)) = %v, want %v", back, fullBatch())
		}
	}
	// A map is laid out by sorted key.
	m := named.FromMap(map[string]int{"kl": 1, "entropy": 2, "clip_ratio/low_mean": 3})
	if !slices.Equal(m.Names, []string{"clip_ratio/low_mean", "entropy", "kl"}) || !slices.Equal(m.Values, []int{3, 2, 1}) {
		t.Errorf("FromMap = %v", m)
	}
}

// bindError returns the panic of Bind[batch[int]](l) as text ("" if none).
func bindError(l named.List[int]) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	named.Bind[batch[int]](l)
	return ""
}

// A layout that is not the struct's fails, naming what is missing, what has no field, and both lists.
func TestBind_MismatchNamesTheInputs(t *testing.T) {
	good := named.Of[int](batch[int]{Caches: []int{0, 0}})
	drop := func(name string) named.List[int] { return good.Without(name) }
	rename := func(from, to string) named.List[int] {
		l := named.List[int]{Names: slices.Clone(good.Names), Values: good.Values}
		l.Names[slices.Index(l.Names, from)] = to
		return l
	}
	swapped := named.List[int]{Names: slices.Clone(good.Names), Values: good.Values}
	swapped.Names[0], swapped.Names[1] = swapped.Names[1], swapped.Names[0]
	for _, c := range []struct {
		name string
		l    named.List[int]
		want []string
	}{
		{"missing", drop("Ref"), []string{"missing Ref", "not named_test.batch's fields (IDs, Pos, Mask, Ref, KL.IDs"}},
		{"extra", good.With("Norm", 0), []string{"no field for Norm", "Sample.Temperature, Norm)"}},
		{"misnamed", rename("Ref", "RefLogProbs"), []string{"missing Ref; no field for RefLogProbs"}},
		{"nested misnamed", rename("KL.Mask", "Mask2"), []string{"missing KL.Mask; no field for Mask2"}},
		{"out of order", swapped, []string{"(Pos, IDs, Mask", "in another order"}},
		{"list element", rename("Caches[1]", "Caches[2]"), []string{"Caches[0], Caches[2]", "not numbered 0, 1"}},
		{"list of another name", rename("Caches[1]", "Cache[1]"), []string{"no field for Cache[1]"}},
	} {
		got := bindError(c.l)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: error %q, want it to contain %q", c.name, got, w)
			}
		}
	}
	if got := bindError(good); got != "" {
		t.Errorf("the struct's own layout: %s", got)
	}
	// A list field may be empty.
	if got := bindError(named.Of[int](batch[int]{})); got != "" {
		t.Errorf("no caches: %s", got)
	}
}

// Args refuses a nil (missing) value, a name given twice, and, once a graph was built from one
// layout, another.
func TestSignature_ArgsChecksTheFeed(t *testing.T) {
	var s named.Signature
	f := named.Of[any](fullBatch())
	args, err := s.Args(f)
	if err != nil || fmt.Sprint(args) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Fatalf("Args = %v, %v", args, err)
	}
	noRef := fullBatch()
	noRef.Ref = nil
	var nilSlice [][]int32
	for _, c := range []struct {
		name string
		f    named.Feed
		want string
	}{
		{"nil", named.Of[any](noRef), "input Ref is missing (nil) in (IDs, Pos, Mask, Ref,"},
		{"typed nil", f.Without("Ref").With("Ref", nilSlice), "input Ref is missing (nil)"},
		{"twice", f.With("Ref", 1), "input Ref given twice"},
		{"other names", named.Of[any](other[any]{rows: rows[any]{1, 2, 3}, RefLogProbs: 4}),
			"inputs (IDs, Pos, Mask, RefLogProbs) differ from those the graph was built with (IDs, Pos, Mask, Ref, KL.IDs"},
	} {
		if _, err := s.Args(c.f); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
}

// Through a real compiled graph: the host feeds one struct and the graph binds another; the build
// fails with both lists of names. The matching struct computes on the right tensors, and the
// outputs come back by name.
func TestSignature_MisnamedInputFailsAtBuild(t *testing.T) {
	b := backend.MustNewForTests()
	defer b.Finalize()
	run := func(bind func(named.Inputs) *Node) (named.List[*tensors.Tensor], error) {
		var sig named.Signature
		var res named.List[*tensors.Tensor]
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("%v", r)
				}
			}()
			e, err := NewExec(b, func(nodes []*Node) []*Node {
				in := sig.Inputs(nodes)
				return sig.Outputs(named.FromMap(map[string]*Node{"diff": bind(in), "ids": in.Get("IDs")}))
			})
			if err != nil {
				return err
			}
			args, err := sig.Args(named.Of[any](rows[any]{IDs: []float32{1, 2}, Pos: []float32{10, 20}, Mask: []float32{100, 200}}))
			if err != nil {
				return err
			}
			outs, err := e.Exec(args...)
			if err != nil {
				return err
			}
			res, err = sig.Results(outs)
			return err
		}()
		return res, err
	}
	_, err := run(func(in named.Inputs) *Node {
		o := named.Bind[other[*Node]](in)
		return Sub(o.RefLogProbs, o.IDs)
	})
	want := "the graph inputs (IDs, Pos, Mask) are not named_test.other's fields (IDs, Pos, Mask, RefLogProbs): missing RefLogProbs"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("misnamed: error %v, want %q", err, want)
	}
	res, err := run(func(in named.Inputs) *Node {
		r := named.Bind[rows[*Node]](in)
		return Sub(r.Mask, r.Pos)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Names, []string{"diff", "ids"}) {
		t.Fatalf("outputs %v, want diff, ids", res.Names)
	}
	if got := res.Map()["diff"].Value().([]float32); !slices.Equal(got, []float32{90, 180}) {
		t.Errorf("Mask − Pos = %v, want [90 180]", got)
	}
}
