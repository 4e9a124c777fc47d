// Package shard runs a compiled graph over several devices of one backend with its rows split:
// the inputs of rank ≥ 1 split along their first (batch) axis, the scalars replicated, the
// variables replicated unless they carry a spec of their own, and every output split along its
// first axis. XLA's SPMD partitioner (GoMLX's AutoSharding, Shardy) partitions the single-device
// graph; nothing here communicates. A graph whose rows are independent of each other (a forward
// pass, a decode step, the sampler) then gives each row what the one-device graph gives it, up to
// the order of float32 additions inside the row.
//
// The mesh of n devices is one object per (backend, n, axis) for the whole process (Mesh), so
// that the training driver's graphs and these read the same variables under the same mesh.
package shard

import (
	"fmt"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// DataAxis is the name of the data-parallel mesh axis.
const DataAxis = "data"

type meshKey struct {
	b    backends.Backend
	n    int
	axis string
}

var (
	meshesMu sync.Mutex
	meshes   = map[meshKey]*distributed.DeviceMesh{}
)

// Mesh returns the 1-D mesh of the first n devices of b along axis, the same object for the same
// arguments: a variable's sharding spec and the context's default spec name their mesh, and a
// graph over another mesh object would not match them.
func Mesh(b backends.Backend, n int, axis string) (*distributed.DeviceMesh, error) {
	if have := b.NumDevices(); n > have {
		return nil, fmt.Errorf("devices %d: the backend %s has %d", n, b.Name(), have)
	}
	meshesMu.Lock()
	defer meshesMu.Unlock()
	k := meshKey{b, n, axis}
	if m := meshes[k]; m != nil {
		return m, nil
	}
	m, err := distributed.NewDeviceMesh([]int{n}, []string{axis})
	if err != nil {
		return nil, fmt.Errorf("devices %d: %w", n, err)
	}
	meshes[k] = m
	return m, nil
}

// Rows splits the rows of graphs over the n devices of a mesh.
type Rows struct {
	n           int
	b           backends.Backend
	mesh        *distributed.DeviceMesh
	split, repl *distributed.ShardingSpec
}

// NewRows returns the row split over the first n (≥ 2) devices of b.
func NewRows(b backends.Backend, n int) (*Rows, error) {
	if n < 2 {
		return nil, fmt.Errorf("devices %d: a row split needs at least 2", n)
	}
	mesh, err := Mesh(b, n, DataAxis)
	if err != nil {
		return nil, err
	}
	split, err := distributed.BuildSpec(mesh).S(DataAxis).Done()
	if err != nil {
		return nil, fmt.Errorf("devices %d: %w", n, err)
	}
	return &Rows{n: n, b: b, mesh: mesh, split: split, repl: distributed.NewReplicatedShardingSpec(mesh)}, nil
}

// N is the number of devices.
func (r *Rows) N() int { return r.n }

// Splitter runs graphs whose rows it can split over the devices of a Rows (generate.Generator,
// step.ContextEval, trainable.Scorer).
type Splitter interface{ SplitRows(*Rows) }

// SplitAll splits the rows of every part over the first n devices of b (one Rows for all, so
// they share the driver's mesh); nothing when n < 2.
func SplitAll(b backends.Backend, n int, parts ...Splitter) error {
	if n < 2 {
		return nil
	}
	rows, err := NewRows(b, n)
	if err != nil {
		return err
	}
	for _, p := range parts {
		p.SplitRows(rows)
	}
	return nil
}

// Pieces is an argument already split over the devices: device d's piece at index d, a tensor
// on that device or a donated buffer (graph.DonateTensorBuffer with device d).
type Pieces []any

// Exec runs e over the devices on args: a Pieces as it is, any other argument (a tensor or a Go
// value) split along its first axis when its rank is ≥ 1 (that axis must divide by N) and
// replicated when it is a scalar. It returns each output's pieces, device d's at [k][d]: the
// outputs of e's graph must all be rows (rank ≥ 1). Which arguments are split is fixed when e
// first compiles, so every call of one e must give arguments of the same ranks.
func (r *Rows) Exec(e *context.Exec, args []any) ([][]*tensors.Tensor, error) {
	specs := make([]*distributed.ShardingSpec, len(args))
	pieces := make([][]any, len(args))
	for i, a := range args {
		specs[i] = r.split
		if p, ok := a.(Pieces); ok {
			if len(p) != r.n {
				return nil, fmt.Errorf("argument %d: %d pieces for %d devices", i, len(p), r.n)
			}
			pieces[i] = p
			continue
		}
		t := tensors.FromAnyValue(a)
		if t.Rank() == 0 {
			specs[i] = r.repl
		} else if d := t.Shape().Dim(0); d%r.n != 0 {
			return nil, fmt.Errorf("argument %d: %d rows do not divide over %d devices", i, d, r.n)
		}
		dt, err := distributed.ShardTensor(specs[i], t)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i, err)
		}
		pieces[i] = make([]any, r.n)
		for d, s := range dt.Shards() {
			pieces[i][d] = s
		}
	}
	if e.DistributionStrategy() != distributed.AutoSharding {
		e.AutoSharding(r.mesh).WithInputShardingSpecs(specs...).WithOutputShardingSpecs(r.split)
		if err := e.SetDefaultShardingSpec(r.repl); err != nil {
			return nil, err
		}
	}
	flat := make([]any, 0, len(args)*r.n) // device-major, as Exec takes them
	for d := range r.n {
		for i := range args {
			flat = append(flat, pieces[i][d])
		}
	}
	outs, err := e.Exec(flat...)
	if err != nil {
		return nil, err
	}
	k := len(outs) / r.n
	res := make([][]*tensors.Tensor, k)
	for o := range k {
		res[o] = make([]*tensors.Tensor, r.n)
		for d := range r.n {
			res[o][d] = outs[d*k+o]
		}
	}
	return res, nil
}

// Donate gives device d's piece of each output as a donated buffer (graph.DonateTensorBuffer),
// for an argument of the next execution that replaces it; the pieces are finalized.
func (r *Rows) Donate(pieces []*tensors.Tensor) (Pieces, error) {
	p := make(Pieces, len(pieces))
	for d, t := range pieces {
		var err error
		if p[d], err = graph.DonateTensorBuffer(t, r.b, backends.DeviceNum(d)); err != nil {
			return nil, fmt.Errorf("donate the piece on device %d: %w", d, err)
		}
	}
	return p, nil
}

// Keep gives the pieces as an argument without donating them.
func Keep(pieces []*tensors.Tensor) Pieces {
	p := make(Pieces, len(pieces))
	for d, t := range pieces {
		p[d] = t
	}
	return p
}

// Merge joins an output's pieces along the first axis into one host tensor and frees the pieces.
func (r *Rows) Merge(pieces []*tensors.Tensor) (*tensors.Tensor, error) {
	defer Free(pieces)
	dt, err := distributed.NewTensor(r.split, pieces)
	if err != nil {
		return nil, err
	}
	return dt.Merge()
}

// Free finalizes the pieces.
func Free(pieces []*tensors.Tensor) {
	for _, t := range pieces {
		if t != nil {
			_ = t.FinalizeAll()
		}
	}
}

// ExecPadded runs e over the devices on args whose rows (every argument of rank ≥ 1, all with
// the same first dimension) need not divide by N: they are padded on the host to the next
// multiple of N with copies of the last row, Exec runs, and each output is merged on the host and
// cut back to the rows given. The padding rows compute what the last row computes, so a graph
// whose rows are independent gives the real rows what it gives them unpadded.
func (r *Rows) ExecPadded(e *context.Exec, args []any) ([]*tensors.Tensor, error) {
	rows := -1
	padded := make([]any, len(args))
	for i, a := range args {
		t := tensors.FromAnyValue(a)
		padded[i] = t
		if t.Rank() == 0 {
			continue
		}
		if d := t.Shape().Dim(0); rows < 0 {
			rows = d
		} else if d != rows {
			return nil, fmt.Errorf("argument %d has %d rows, argument 0 %d", i, d, rows)
		}
		if rows%r.n != 0 {
			var err error
			if padded[i], err = resizeRows(t, (rows+r.n-1)/r.n*r.n); err != nil {
				return nil, fmt.Errorf("argument %d: %w", i, err)
			}
		}
	}
	pieces, err := r.Exec(e, padded)
	if err != nil {
		return nil, err
	}
	outs := make([]*tensors.Tensor, len(pieces))
	for k, p := range pieces {
		t, err := r.Merge(p)
		if err == nil && rows >= 0 && t.Shape().Dim(0) != rows {
			whole := t
			t, err = resizeRows(whole, rows)
			_ = whole.FinalizeAll()
		}
		if err != nil {
			for _, q := range pieces[k+1:] {
				Free(q)
			}
			return nil, fmt.Errorf("output %d: %w", k, err)
		}
		outs[k] = t
	}
	return outs, nil
}

// resizeRows is a host copy of t with n rows along its first axis: its first n rows, or all of
// them followed by copies of the last.
func resizeRows(t *tensors.Tensor, n int) (*tensors.Tensor, error) {
	dims := t.Shape().Clone()
	have := dims.Dimensions[0]
	if have == 0 {
		return nil, fmt.Errorf("no rows to pad")
	}
	dims.Dimensions[0] = n
	out := tensors.FromShape(dims)
	var err error
	if e := t.ConstBytes(func(src []byte) {
		row := len(src) / have
		err = out.MutableBytes(func(dst []byte) {
			copy(dst, src)
			for at := have * row; at < len(dst); at += row {
				copy(dst[at:at+row], src[len(src)-row:])
			}
		})
	}); e != nil {
		return nil, e
	}
	return out, err
}
