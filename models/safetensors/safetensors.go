// Package safetensors reads and writes HuggingFace safetensors files and model directories.
//
// A file is an 8-byte little-endian header length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {string: string}},
// then the raw little-endian tensor data; offsets are relative to the data section, which the
// tensors cover exactly, without gaps or overlaps (https://github.com/huggingface/safetensors).
// Every malformed input is reported as an error naming the file and, where there is one, the
// tensor; nothing here panics on file contents.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sync"
)

// Tensor is one named tensor: its dtype as spelled in the header ("F32", "BF16", ...), its shape
// and its raw little-endian bytes (len(Data) == product(Shape) × DTypeSize(DType)).
//
// A tensor may instead be produced when it is needed: Data nil and Stream set. The writers call
// Stream when they reach the tensor, and it writes the tensor's bytes piece by piece, so a model
// converted tensor by tensor (a GGUF dequantised as it is written) holds a piece of one tensor in
// memory, not the model; the readers (Float32s, DecodeFloat32s, Float64s) collect what it writes.
type Tensor struct {
	Name   string
	DType  string
	Shape  []int
	Data   []byte
	Stream func(w io.Writer) error
}

// lazy reports whether the tensor's bytes come from Stream.
func (t *Tensor) lazy() bool { return t.Data == nil && t.Stream != nil }

// ByteSize is product(Shape) × DTypeSize(DType), the bytes the tensor takes in a file (known
// without streaming a lazy tensor).
func (t *Tensor) ByteSize() (int64, error) {
	n, err := byteSize(t.DType, t.Shape)
	if err != nil {
		return 0, fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	return n, nil
}

// WriteData writes the tensor's bytes to w: Data, or what Stream writes, which must be ByteSize
// bytes.
func (t *Tensor) WriteData(w io.Writer) error {
	if !t.lazy() {
		if err := t.check(); err != nil {
			return err
		}
		_, err := w.Write(t.Data)
		return err
	}
	want, err := t.ByteSize()
	if err != nil {
		return err
	}
	c := &countingWriter{w: w}
	if err := t.Stream(c); err != nil {
		return fmt.Errorf("tensor %q: %w", t.Name, err)
	}
	if c.n != want {
		return fmt.Errorf("tensor %q: %s%v needs %d bytes, its stream wrote %d", t.Name, t.DType, t.Shape, want, c.n)
	}
	return nil
}

// countingWriter counts what passes through it.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// loaded is t itself, or for a lazy tensor a copy holding what Stream writes.
func (t *Tensor) loaded() (*Tensor, error) {
	if !t.lazy() {
		return t, nil
	}
	n, err := t.ByteSize()
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.Grow(int(n))
	if err := t.WriteData(&b); err != nil {
		return nil, err
	}
	return &Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Data: b.Bytes()}, nil
}

// dtypeSizes are the element sizes in bytes of the dtypes the safetensors format defines.
var dtypeSizes = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

// DTypeSize returns the size in bytes of one element of dtype, and false for an unknown dtype.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// NumElements is the product of the shape's dimensions (1 for a scalar).
func (t *Tensor) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// byteSize returns product(shape) × size(dtype), or an error for an unknown dtype, a negative
// dimension or an overflow.
func byteSize(dtype string, shape []int) (int64, error) {
	size, ok := dtypeSizes[dtype]
	if !ok {
		return 0, fmt.Errorf("unknown dtype %q", dtype)
	}
	n := int64(size)
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && n > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n *= int64(d)
	}
	return n, nil
}

// check verifies that Data holds exactly product(Shape) elements of DType (for a lazy tensor, that
// its dtype and shape are valid; Bytes checks what Load returns).
func (t *Tensor) check() error {
	want, err := t.ByteSize()
	if err != nil {
		return err
	}
	if t.lazy() {
		return nil
	}
	if int64(len(t.Data)) != want {
		return fmt.Errorf("tensor %q: %s%v needs %d bytes, has %d", t.Name, t.DType, t.Shape, want, len(t.Data))
	}
	return nil
}

// Float32sShaped returns the float32 values (Float32s) of stored[name] after checking that the
// tensor is there and has the shape want: what restoring a variable from a file needs. Its errors
// name the tensor ("tensor NAME is missing", "tensor NAME has shape S, want W"); callers add the file.
func Float32sShaped(stored map[string]*Tensor, name string, want []int) ([]float32, error) {
	t, ok := stored[name]
	if !ok {
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	if !slices.Equal(t.Shape, want) {
		return nil, fmt.Errorf("tensor %s has shape %v, want %v", name, t.Shape, want)
	}
	f, err := t.Float32s()
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", name, err)
	}
	return f, nil
}

// Float32s converts the data to float32: F32 as is, BF16 and F16 exactly, F64 rounded.
func (t *Tensor) Float32s() ([]float32, error) {
	t, err := t.loaded()
	if err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	out := make([]float32, t.NumElements())
	if err := t.DecodeFloat32s(out); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeFloat32s converts the data to float32 as Float32s does, into dst (NumElements long):
// loading a model decodes each tensor straight into the memory that will hold it. A large tensor
// is decoded in slices on all CPUs (reading a mapped file and writing fresh memory is mostly page
// faults, which run in parallel).
func (t *Tensor) DecodeFloat32s(dst []float32) error {
	t, err := t.loaded()
	if err != nil {
		return err
	}
	if err := t.check(); err != nil {
		return err
	}
	if n := t.NumElements(); len(dst) != n {
		return fmt.Errorf("tensor %q: %d values to decode into %d", t.Name, n, len(dst))
	}
	var decode func(d []byte, dst []float32)
	switch t.DType {
	case "F32":
		decode = func(d []byte, dst []float32) {
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(d[4*i:]))
			}
		}
	case "BF16":
		decode = func(d []byte, dst []float32) {
			for i := range dst {
				dst[i] = BF16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
			}
		}
	case "F16":
		decode = func(d []byte, dst []float32) {
			for i := range dst {
				dst[i] = F16ToFloat32(binary.LittleEndian.Uint16(d[2*i:]))
			}
		}
	case "F64":
		decode = func(d []byte, dst []float32) {
			for i := range dst {
				dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(d[8*i:])))
			}
		}
	default:
		return fmt.Errorf("tensor %q: dtype %s is not a floating-point type", t.Name, t.DType)
	}
	size := len(t.Data) / max(len(dst), 1)
	parts := min(runtime.GOMAXPROCS(0), len(dst)/parallelDecodeMin)
	if parts <= 1 {
		decode(t.Data, dst)
		return nil
	}
	var wg sync.WaitGroup
	for p := range parts {
		lo, hi := p*len(dst)/parts, (p+1)*len(dst)/parts
		wg.Go(func() { decode(t.Data[lo*size:hi*size], dst[lo:hi]) })
	}
	wg.Wait()
	return nil
}

// parallelDecodeMin is the fewest values per goroutine of DecodeFloat32s.
const parallelDecodeMin = 1 << 20

// Float64s converts the data to float64 (exactly, for every supported dtype).
func (t *Tensor) Float64s() ([]float64, error) {
	t, err := t.loaded()
	if err != nil {
		return nil, err
	}
	if t.DType == "F64" {
		if err := t.check(); err != nil {
			return nil, err
		}
		out := make([]float64, len(t.Data)/8)
		for i := range out {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
		return out, nil
	}
	f, err := t.Float32s()
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(f))
	for i, v := range f {
		out[i] = float64(v)
	}
	return out, nil
}

// FromFloat32s builds a tensor of dtype F32, BF16 or F16 (rounded to nearest even) or F64 from
// row-major data. It panics if the dtype is none of these or len(data) != product(shape): both
// are programming errors, not input errors.
func FromFloat32s(name string, shape []int, data []float32, dtype string) *Tensor {
	t := &Tensor{Name: name, DType: dtype, Shape: append([]int(nil), shape...)}
	if n := t.NumElements(); n != len(data) {
		panic(fmt.Sprintf("safetensors.FromFloat32s(%q): shape %v has %d elements, data has %d", name, shape, n, len(data)))
	}
	t.Data = AppendFloat32s(nil, data, dtype)
	return t
}

// AppendFloat32s appends v encoded as dtype F32, BF16 or F16 (rounded to nearest even) or F64 to
// b, little-endian; it panics for another dtype (a programming error).
func AppendFloat32s(b []byte, v []float32, dtype string) []byte {
	size, ok := map[string]int{"F32": 4, "BF16": 2, "F16": 2, "F64": 8}[dtype]
	if !ok {
		panic(fmt.Sprintf("safetensors.AppendFloat32s: dtype %q is not F32, BF16, F16 or F64", dtype))
	}
	b = slices.Grow(b, size*len(v))
	out := b[len(b) : len(b)+size*len(v)]
	switch dtype {
	case "F32":
		for i, x := range v {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(x))
		}
	case "BF16":
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToBF16(x))
		}
	case "F16":
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], Float32ToF16(x))
		}
	case "F64":
		for i, x := range v {
			binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(float64(x)))
		}
	}
	return b[:len(b)+len(out)]
}
