// Package named carries the inputs of a compiled GoMLX graph, and the outputs it returns, by name
// instead of by position. context.Exec takes and returns positional arguments, so a host batch and
// the graph function reading it used to agree on an order (in[k], k = 0…10): a mismatch compiled and
// silently read the wrong tensor. Here:
//
//   - A graph's inputs are declared once, as a generic struct whose fields are T, []T or structs of
//     them: `type batch[T any] struct { IDs, Pos, Mask T; Ref T }`. The host fills batch[any] and
//     turns it into a Feed (Of); the graph function receives Inputs with the same names and binds
//     batch[*graph.Node] (Bind). Both sides are one declaration, so a field misnamed on one side
//     does not compile. Embedded structs add their fields as they are, named struct fields prefix
//     theirs ("KL.IDs"), a slice field gives one input per element ("Caches[0]", "Caches[1]", …).
//   - The order of the Exec arguments is derived in one place, Of: the struct's field order (for a
//     map, such as a trainer's metrics, FromMap: its keys sorted).
//   - A Signature holds the names of one compiled graph: the first Feed names its inputs and a later
//     Feed with other names is refused (a graph compiled for one layout would read another wrongly);
//     a graph function binding a struct whose fields are not the Feed's names (a missing, extra or
//     misnamed input) fails while the graph is built, with both lists of names in the error. It
//     records the names of the outputs a build lays out, so the host reads them back by name.
//
// Graph-side failures are panics, as everywhere in GoMLX graph code; the Exec boundaries (trainers/
// step, trainers/engine/loop, models/generate) turn them into errors. Of and Bind panic as well on a struct
// they cannot lay out (a field of another type): a programming error that any call shows.
package named

import (
	"fmt"
	"path"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// List is values with names, in the order a graph takes or returns them.
type List[V any] struct {
	Names  []string
	Values []V
}

// Feed is a graph's inputs on the host: Go slices, scalars or tensors by name.
type Feed = List[any]

// Inputs are a graph's inputs as its function receives them.
type Inputs = List[*graph.Node]

// Get returns the value named name; it panics, listing the names there are, when there is none
// (graph side: the build fails with that message).
func (l List[V]) Get(name string) V {
	if i := slices.Index(l.Names, name); i >= 0 {
		return l.Values[i]
	}
	panic(fmt.Errorf("named: no input %q among (%s)", name, strings.Join(l.Names, ", ")))
}

// With returns l with v appended under name (l is not changed).
func (l List[V]) With(name string, v V) List[V] {
	return List[V]{Names: append(slices.Clone(l.Names), name), Values: append(slices.Clone(l.Values), v)}
}

// Without returns l without the value named name (l is not changed).
func (l List[V]) Without(name string) List[V] {
	var out List[V]
	for i, n := range l.Names {
		if n != name {
			out.Names, out.Values = append(out.Names, n), append(out.Values, l.Values[i])
		}
	}
	return out
}

// Map returns the values by name.
func (l List[V]) Map() map[string]V {
	m := make(map[string]V, len(l.Names))
	for i, n := range l.Names {
		m[n] = l.Values[i]
	}
	return m
}

// FromMap lays m out in the order of its keys, sorted.
func FromMap[V any](m map[string]V) List[V] {
	l := List[V]{Names: make([]string, 0, len(m))}
	for k := range m {
		l.Names = append(l.Names, k)
	}
	sort.Strings(l.Names)
	for _, k := range l.Names {
		l.Values = append(l.Values, m[k])
	}
	return l
}

// Of lays out the struct s (or *s), whose fields are V, []V or structs of them, in field order:
// the Feed of a host batch (V = any) or the outputs of a graph function (V = *graph.Node).
func Of[V any](s any) List[V] {
	v := reflect.Indirect(reflect.ValueOf(s))
	if v.Kind() != reflect.Struct {
		panic(fmt.Errorf("named: Of needs a struct, got %T", s))
	}
	var l List[V]
	add := func(name string, x reflect.Value) {
		val, _ := x.Interface().(V) // a nil interface field stays the zero V: Signature.Args refuses it
		l.Names, l.Values = append(l.Names, name), append(l.Values, val)
	}
	for _, f := range layout(v.Type(), reflect.TypeFor[V]()) {
		x := v.FieldByIndex(f.index)
		if !f.list {
			add(f.name, x)
			continue
		}
		for k := range x.Len() {
			add(element(f.name, k), x.Index(k))
		}
	}
	return l
}

// Bind fills a struct S from l, field by field in the order Of lays S out (a slice field takes
// the consecutive values named field[0], field[1], …). It panics when l's names are not S's
// fields, naming the missing, extra or misplaced ones and both lists.
func Bind[S any, V any](l List[V]) S {
	var s S
	v := reflect.ValueOf(&s).Elem()
	if v.Kind() != reflect.Struct {
		panic(fmt.Errorf("named: Bind needs a struct type, got %s", v.Type()))
	}
	fields := layout(v.Type(), reflect.TypeFor[V]())
	i := 0
	for _, f := range fields {
		x := v.FieldByIndex(f.index)
		if !f.list {
			if i >= len(l.Names) || l.Names[i] != f.name {
				panic(mismatch(v.Type(), fields, l.Names))
			}
			x.Set(reflect.ValueOf(&l.Values[i]).Elem())
			i++
			continue
		}
		start := i
		for i < len(l.Names) && l.Names[i] == element(f.name, i-start) {
			i++
		}
		x.Set(reflect.ValueOf(slices.Clone(l.Values[start:i])))
	}
	if i != len(l.Names) {
		panic(mismatch(v.Type(), fields, l.Names))
	}
	return s
}

// field is one entry of a struct's layout: a V (one value) or a []V (list: one value per element).
type field struct {
	name  string
	index []int // reflect's FieldByIndex path
	list  bool
}

func element(name string, k int) string { return fmt.Sprintf("%s[%d]", name, k) }

// layout is t's fields of type leaf or []leaf, in declaration order, descending into struct
// fields (embedded: their names as they are; named: prefixed "Name.").
func layout(t, leaf reflect.Type) []field {
	var out []field
	var walk func(t reflect.Type, prefix string, index []int)
	walk = func(t reflect.Type, prefix string, index []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			idx, name := append(slices.Clone(index), i), prefix+f.Name
			switch {
			case f.Anonymous && f.Type.Kind() == reflect.Struct:
				walk(f.Type, prefix, idx)
			case !f.IsExported():
				panic(fmt.Errorf("named: %s has an unexported field %s", typeName(t), f.Name))
			case f.Type == leaf:
				out = append(out, field{name: name, index: idx})
			case f.Type.Kind() == reflect.Slice && f.Type.Elem() == leaf:
				out = append(out, field{name: name, index: idx, list: true})
			case f.Type.Kind() == reflect.Struct:
				walk(f.Type, name+".", idx)
			default:
				panic(fmt.Errorf("named: field %s of %s is a %s: want %s, []%s or a struct of them", f.Name, typeName(t), f.Type, leaf, leaf))
			}
		}
	}
	walk(t, "", nil)
	seen := map[string]bool{}
	for _, f := range out {
		if seen[f.name] {
			panic(fmt.Errorf("named: %s has two fields named %s", typeName(t), f.name))
		}
		seen[f.name] = true
	}
	return out
}

// typeName is t as package.Name, without type arguments: kto.batch for kto.batch[*graph.Node].
func typeName(t reflect.Type) string {
	n := t.Name()
	if i := strings.IndexByte(n, '['); i >= 0 {
		n = n[:i]
	}
	if n == "" {
		return t.String()
	}
	return path.Base(t.PkgPath()) + "." + n
}

// mismatch is Bind's error: the inputs missing from names, those S has no field for, or, when
// both are the right set, that the order differs.
func mismatch(t reflect.Type, fields []field, names []string) error {
	var want, missing, extra []string
	for _, f := range fields {
		if f.list {
			want = append(want, f.name+"[…]")
			continue
		}
		want = append(want, f.name)
		if !slices.Contains(names, f.name) {
			missing = append(missing, f.name)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(fields, func(f field) bool {
			return n == f.name || f.list && strings.HasPrefix(n, f.name+"[")
		}) {
			extra = append(extra, n)
		}
	}
	var what []string
	if len(missing) > 0 {
		what = append(what, "missing "+strings.Join(missing, ", "))
	}
	if len(extra) > 0 {
		what = append(what, "no field for "+strings.Join(extra, ", "))
	}
	if len(what) == 0 {
		what = append(what, "in another order (or a list's elements not numbered 0, 1, …)")
	}
	return fmt.Errorf("named: the graph inputs (%s) are not %s's fields (%s): %s", strings.Join(names, ", "),
		typeName(t), strings.Join(want, ", "), strings.Join(what, "; "))
}

// Signature holds the names of one compiled graph's inputs and of the outputs it lays out by
// name. context.Exec compiles its function once per input shapes and hands it positional nodes:
// Args turns a Feed into the Exec arguments (the first fixes the names; another layout is
// refused), Inputs pairs the nodes of the graph being built with those names, Outputs records the
// names of the outputs a build returns and Results pairs the Exec's output tensors with them.
// Not safe for concurrent use (neither is an Exec).
type Signature struct {
	inputs, outputs []string
	named, built    bool
}

// Args checks f (distinct names, no nil value) and returns its values as Exec arguments. The first
// Feed fixes the graph's input names; a later one with other names is an error naming both lists.
func (s *Signature) Args(f Feed) ([]any, error) {
	if len(f.Names) != len(f.Values) {
		return nil, fmt.Errorf("named: %d names for %d inputs", len(f.Names), len(f.Values))
	}
	for i, n := range f.Names {
		if slices.Index(f.Names, n) != i {
			return nil, fmt.Errorf("named: input %s given twice in (%s)", n, strings.Join(f.Names, ", "))
		}
		if isNil(f.Values[i]) {
			return nil, fmt.Errorf("named: input %s is missing (nil) in (%s)", n, strings.Join(f.Names, ", "))
		}
	}
	switch {
	case !s.named:
		s.inputs, s.named = slices.Clone(f.Names), true
	case !slices.Equal(s.inputs, f.Names):
		return nil, fmt.Errorf("named: inputs (%s) differ from those the graph was built with (%s)",
			strings.Join(f.Names, ", "), strings.Join(s.inputs, ", "))
	}
	return slices.Clone(f.Values), nil
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Map, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// Inputs pairs the nodes a graph function receives with the names of the Feed being run.
func (s *Signature) Inputs(nodes []*graph.Node) Inputs {
	if !s.named || len(nodes) != len(s.inputs) {
		panic(fmt.Errorf("named: %d graph inputs for the names (%s)", len(nodes), strings.Join(s.inputs, ", ")))
	}
	return Inputs{Names: slices.Clone(s.inputs), Values: nodes}
}

// Outputs returns l's nodes as the graph function's outputs and records their names; every build
// of the graph (one per input shapes) must name the same outputs, and none may be nil.
func (s *Signature) Outputs(l List[*graph.Node]) []*graph.Node {
	for i, n := range l.Values {
		if n == nil {
			panic(fmt.Errorf("named: output %s is nil", l.Names[i]))
		}
	}
	if s.built && !slices.Equal(s.outputs, l.Names) {
		panic(fmt.Errorf("named: outputs (%s) differ from an earlier build's (%s)", strings.Join(l.Names, ", "),
			strings.Join(s.outputs, ", ")))
	}
	s.outputs, s.built = slices.Clone(l.Names), true
	return l.Values
}

// Results pairs the output tensors of an Exec with the names Outputs recorded.
func (s *Signature) Results(ts []*tensors.Tensor) (List[*tensors.Tensor], error) {
	return ResultsOf(s, ts)
}

// ResultsOf pairs one value per output of s's graph with the names Outputs recorded: its
// tensors (Results), or each output's pieces on several devices (internal/shard).
func ResultsOf[V any](s *Signature, vs []V) (List[V], error) {
	if !s.built || len(vs) != len(s.outputs) {
		return List[V]{}, fmt.Errorf("named: %d results for the outputs (%s)", len(vs), strings.Join(s.outputs, ", "))
	}
	return List[V]{Names: slices.Clone(s.outputs), Values: vs}, nil
}
