// Package gguf reads GGUF files (llama.cpp's model format, versions 2 and 3): the header, the
// metadata of every value type (nested arrays too), the tensor infos and the aligned data section,
// and dequantises the common ggml block types to float32 (dequant.go).
//
// The layout, as ggml's docs/gguf.md and gguf.cpp's gguf_init_from_file_impl read it (all
// little-endian):
//
//	magic "GGUF" · u32 version · u64 tensor_count · u64 kv_count
//	kv_count × (string key · u32 value_type · value)
//	tensor_count × (string name · u32 n_dims · u64 ne[n_dims] · u32 ggml_type · u64 offset)
//	padding to general.alignment (default 32) · tensor data (offsets relative to its start)
//
// where a string is u64 length + bytes and an array value is u32 element type · u64 n · n values.
// ne[0] is the fastest-varying axis: a PyTorch [out, in] weight is stored with ne = [in, out].
//
// Every count and length is checked against the bytes left in the file before anything is
// allocated, so a truncated or hostile file is one error naming the field and its offset.
package gguf

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Magic is the first four bytes of a GGUF file.
const Magic = "GGUF"

// DefaultAlignment is the data section's alignment when general.alignment is absent.
const DefaultAlignment = 32

// MaxDims is GGML_MAX_DIMS: a tensor has at most 4 dimensions.
const MaxDims = 4

// MaxNameLen is GGML_MAX_NAME: gguf.cpp refuses tensor names of 64 bytes or more.
const MaxNameLen = 64

// maxArrayDepth bounds the nesting of array values (real files nest at most once).
const maxArrayDepth = 8

// ValueType is a metadata value's type (enum gguf_type).
type ValueType uint32

// The metadata value types.
const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
	"bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value_type(%d)", uint32(t))
}

// Array is an array value: its element type and its values, each of the Go type the element type
// reads as (uint8 … float64, bool, string; Array when nested).
type Array struct {
	Elem   ValueType
	Values []any
}

// KV is one metadata entry; Value is uint8, int8, uint16, int16, uint32, int32, float32, bool,
// string, uint64, int64, float64 or Array, as Type says.
type KV struct {
	Key   string
	Type  ValueType
	Value any
}

// TensorInfo describes one tensor of the file.
type TensorInfo struct {
	Name string
	// Dims is ne in ggml's order: Dims[0] is the fastest axis (see Shape).
	Dims []int64
	Type Type
	// Offset is where the data starts, relative to File.DataOffset.
	Offset int64
	// InfoOffset is where the tensor's info starts in the file (for error messages).
	InfoOffset int64
}

// Elements is the number of elements (1 for a 0-dimensional tensor).
func (t *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// Bytes is the stored size of the data.
func (t *TensorInfo) Bytes() int64 {
	return t.Elements() / t.Type.BlockSize() * t.Type.BlockBytes()
}

// Shape is the row-major (PyTorch/safetensors) shape: Dims reversed.
func (t *TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(t.Dims)-1-i] = int(d)
	}
	return s
}

// File is a parsed GGUF file; its tensor data is read on demand.
type File struct {
	Path       string
	Version    uint32
	Alignment  int64
	Metadata   []KV
	Tensors    []TensorInfo
	DataOffset int64
	Size       int64

	r       io.ReaderAt
	closer  io.Closer
	keys    map[string]int
	tensors map[string]int
}

// Open parses the GGUF file at path; Close releases it.
func Open(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf: %w", err)
	}
	g, err := Parse(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	g.Path, g.closer = path, f
	return g, nil
}

// Close closes the file Open opened.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	return f.closer.Close()
}

// Get returns the value of key.
func (f *File) Get(key string) (KV, bool) {
	i, ok := f.keys[key]
	if !ok {
		return KV{}, false
	}
	return f.Metadata[i], true
}

// Tensor returns the info of the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Raw reads the stored bytes of tensor t.
func (f *File) Raw(t *TensorInfo) ([]byte, error) {
	buf := make([]byte, t.Bytes())
	if _, err := f.r.ReadAt(buf, f.DataOffset+t.Offset); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q at offset %d: %w", t.Name, f.DataOffset+t.Offset, err)
	}
	return buf, nil
}

// Float32 reads tensor t and dequantises it to float32, in ggml's element order (row-major for
// Shape).
func (f *File) Float32(t *TensorInfo) ([]float32, error) {
	raw, err := f.Raw(t)
	if err != nil {
		return nil, err
	}
	out, err := Dequantize(t.Type, raw, t.Elements())
	if err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
	}
	return out, nil
}

// float32Piece is how many elements Float32Pieces dequantises at a time (rounded to whole blocks).
const float32Piece = 1 << 20

// Float32Pieces reads tensor t and dequantises it piece by piece, in ggml's element order, giving
// each piece (about a million elements, whole blocks; the slice is reused) to fn: a tensor of
// any size is converted in a few megabytes.
func (f *File) Float32Pieces(t *TensorInfo, fn func(v []float32) error) error {
	bs, bb := t.Type.BlockSize(), t.Type.BlockBytes()
	blocks := t.Elements() / bs
	per := max(1, float32Piece/bs)
	raw := make([]byte, min(per, blocks)*bb)
	v := make([]float32, min(per, blocks)*bs)
	for b := int64(0); b < blocks; b += per {
		n := min(per, blocks-b)
		at := f.DataOffset + t.Offset + b*bb
		if _, err := f.r.ReadAt(raw[:n*bb], at); err != nil {
			return fmt.Errorf("gguf: tensor %q at offset %d: %w", t.Name, at, err)
		}
		if err := dequantizeInto(t.Type, v[:n*bs], raw[:n*bb]); err != nil {
			return fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
		if err := fn(v[:n*bs]); err != nil {
			return err
		}
	}
	return nil
}

// String returns the string value of key.
func (f *File) String(key string) (string, error) {
	kv, ok := f.Get(key)
	if !ok {
		return "", fmt.Errorf("gguf: metadata %s is missing", key)
	}
	s, ok := kv.Value.(string)
	if !ok {
		return "", fmt.Errorf("gguf: metadata %s is %s, not string", key, kv.Type)
	}
	return s, nil
}

// Int returns the value of key, an integer of any width (a bool reads as 0 or 1).
func (f *File) Int(key string) (int64, error) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, fmt.Errorf("gguf: metadata %s is missing", key)
	}
	v, ok := asInt(kv.Value)
	if !ok {
		return 0, fmt.Errorf("gguf: metadata %s is %s, not an integer", key, kv.Type)
	}
	return v, nil
}

// Float returns the value of key, a float or an integer.
func (f *File) Float(key string) (float64, error) {
	kv, ok := f.Get(key)
	if !ok {
		return 0, fmt.Errorf("gguf: metadata %s is missing", key)
	}
	switch v := kv.Value.(type) {
	case float32:
		return float64(v), nil
	case float64:
		return v, nil
	}
	if v, ok := asInt(kv.Value); ok {
		return float64(v), nil
	}
	return 0, fmt.Errorf("gguf: metadata %s is %s, not a number", key, kv.Type)
}

// Strings returns the array of strings at key.
func (f *File) Strings(key string) ([]string, error) {
	a, err := f.array(key, "string")
	if err != nil {
		return nil, err
	}
	out := make([]string, len(a.Values))
	for i, v := range a.Values {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("gguf: metadata %s is an array of %s, not of string", key, a.Elem)
		}
		out[i] = s
	}
	return out, nil
}

// Ints returns the array of integers at key.
func (f *File) Ints(key string) ([]int64, error) {
	a, err := f.array(key, "integer")
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(a.Values))
	for i, v := range a.Values {
		n, ok := asInt(v)
		if !ok {
			return nil, fmt.Errorf("gguf: metadata %s is an array of %s, not of integers", key, a.Elem)
		}
		out[i] = n
	}
	return out, nil
}

// Float32s returns the array of numbers at key as float32 (tokenizer.ggml.scores).
func (f *File) Float32s(key string) ([]float32, error) {
	a, err := f.array(key, "float32")
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(a.Values))
	for i, v := range a.Values {
		switch v := v.(type) {
		case float32:
			out[i] = v
		case float64:
			out[i] = float32(v)
		default:
			n, ok := asInt(v)
			if !ok {
				return nil, fmt.Errorf("gguf: metadata %s is an array of %s, not of numbers", key, a.Elem)
			}
			out[i] = float32(n)
		}
	}
	return out, nil
}

func (f *File) array(key, want string) (Array, error) {
	kv, ok := f.Get(key)
	if !ok {
		return Array{}, fmt.Errorf("gguf: metadata %s is missing", key)
	}
	a, ok := kv.Value.(Array)
	if !ok {
		return Array{}, fmt.Errorf("gguf: metadata %s is %s, not an array of %s", key, kv.Type, want)
	}
	return a, nil
}

func asInt(v any) (int64, bool) {
	switch v := v.(type) {
	case uint8:
		return int64(v), true
	case int8:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint64:
		if v > 1<<63-1 {
			return 0, false
		}
		return int64(v), true
	case int64:
		return v, true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// Summary is a one-line description: version, architecture, counts.
func (f *File) Summary() string {
	arch, _ := f.String("general.architecture")
	counts := map[Type]int{}
	for _, t := range f.Tensors {
		counts[t.Type]++
	}
	var parts []string
	for t, n := range counts {
		parts = append(parts, fmt.Sprintf("%s×%d", t, n))
	}
	slices.Sort(parts)
	return fmt.Sprintf("GGUF v%d, architecture %q, %d metadata keys, %d tensors (%s)",
		f.Version, arch, len(f.Metadata), len(f.Tensors), strings.Join(parts, " "))
}
