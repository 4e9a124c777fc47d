package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// Minimum encoded sizes, used to bound counts before allocating: a string is at least its u64
// length, an array at least its u32 type and u64 count, a KV at least an empty key, its u32 type
// and a one-byte value, a tensor info at least an empty name, n_dims, type and offset.
const (
	minStringBytes = 8
	minArrayBytes  = 12
	minKVBytes     = 8 + 4 + 1
	minTensorBytes = 8 + 4 + 4 + 8
)

// headerReader reads the header sequentially, tracking the offset and the bytes left.
type headerReader struct {
	br   *bufio.Reader
	off  int64
	size int64
	buf  [8]byte
}

func (d *headerReader) left() int64 { return d.size - d.off }

// need fails unless n more bytes are in the file.
func (d *headerReader) need(n int64, what string) error {
	if n < 0 || n > d.left() {
		return fmt.Errorf("%s at offset %d: truncated (needs %d bytes, %d left)", what, d.off, n, d.left())
	}
	return nil
}

func (d *headerReader) read(p []byte, what string) error {
	if err := d.need(int64(len(p)), what); err != nil {
		return err
	}
	if _, err := io.ReadFull(d.br, p); err != nil {
		return fmt.Errorf("%s at offset %d: %w", what, d.off, err)
	}
	d.off += int64(len(p))
	return nil
}

func (d *headerReader) u8(what string) (uint8, error) {
	err := d.read(d.buf[:1], what)
	return d.buf[0], err
}

func (d *headerReader) u16(what string) (uint16, error) {
	err := d.read(d.buf[:2], what)
	return binary.LittleEndian.Uint16(d.buf[:2]), err
}

func (d *headerReader) u32(what string) (uint32, error) {
	err := d.read(d.buf[:4], what)
	return binary.LittleEndian.Uint32(d.buf[:4]), err
}

func (d *headerReader) u64(what string) (uint64, error) {
	err := d.read(d.buf[:8], what)
	return binary.LittleEndian.Uint64(d.buf[:8]), err
}

// str reads a u64 length and that many bytes, the length checked against the file first.
func (d *headerReader) str(what string) (string, error) {
	at := d.off
	n, err := d.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > uint64(d.left()) {
		return "", fmt.Errorf("%s at offset %d: length %d is past the end of the file (%d bytes left)", what, at, n, d.left())
	}
	b := make([]byte, n)
	if err := d.read(b, what); err != nil {
		return "", err
	}
	return string(b), nil
}

// Parse reads a GGUF file of size bytes from r: the header, metadata and tensor infos, checked
// (see the package doc); tensor data is read later through the File.
func Parse(r io.ReaderAt, size int64) (*File, error) {
	d := &headerReader{br: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 1<<16), size: size}
	f := &File{Size: size, r: r, Alignment: DefaultAlignment, keys: map[string]int{}, tensors: map[string]int{}}
	var magic [4]byte
	if err := d.read(magic[:], "magic"); err != nil {
		return nil, err
	}
	if string(magic[:]) != Magic {
		return nil, fmt.Errorf("magic at offset 0: %q is not %q (not a GGUF file)", magic[:], Magic)
	}
	v, err := d.u32("version")
	if err != nil {
		return nil, err
	}
	switch {
	case v&0xffff == 0 && v != 0:
		return nil, fmt.Errorf("version at offset 4: %#x reads as a big-endian file, which is not supported", v)
	case v != 2 && v != 3:
		return nil, fmt.Errorf("version at offset 4: %d is not supported (GGUF v2 and v3 are)", v)
	}
	f.Version = v
	nTensors, err := d.count("tensor_count", minTensorBytes)
	if err != nil {
		return nil, err
	}
	nKV, err := d.count("kv_count", minKVBytes)
	if err != nil {
		return nil, err
	}
	f.Metadata = make([]KV, 0, nKV)
	for i := range nKV {
		kv, err := d.kv(i)
		if err != nil {
			return nil, err
		}
		if _, dup := f.keys[kv.Key]; dup {
			return nil, fmt.Errorf("metadata key %d %q: duplicate key", i, kv.Key)
		}
		f.keys[kv.Key] = len(f.Metadata)
		f.Metadata = append(f.Metadata, kv)
	}
	if err := f.readAlignment(); err != nil {
		return nil, err
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := range nTensors {
		t, err := d.tensorInfo(i)
		if err != nil {
			return nil, err
		}
		if j, dup := f.tensors[t.Name]; dup {
			return nil, fmt.Errorf("tensor %d %q (info at offset %d): duplicate name (tensor %d)", i, t.Name, t.InfoOffset, j)
		}
		f.tensors[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = alignUp(d.off, f.Alignment)
	// As gguf.cpp's gguf_init_from_file_impl: each tensor's data starts where the previous one's
	// (padded to the alignment) ends, in the order of the infos, so no two tensors overlap and
	// no byte of the data section is read as two tensors.
	next := int64(0)
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if err := f.checkTensor(t); err != nil {
			return nil, err
		}
		if t.Offset != next {
			return nil, fmt.Errorf("tensor %q (info at offset %d): data offset %d, expected %d: tensor data must follow one another in order without overlap", t.Name, t.InfoOffset, t.Offset, next)
		}
		next += alignUp(t.Bytes(), f.Alignment)
	}
	return f, nil
}

// count reads a u64 count of items of at least min bytes each, refusing more than the file holds.
func (d *headerReader) count(what string, min int64) (int64, error) {
	at := d.off
	n, err := d.u64(what)
	if err != nil {
		return 0, err
	}
	if n > uint64(d.left()/min) {
		return 0, fmt.Errorf("%s at offset %d: %d entries cannot fit in the %d bytes left", what, at, n, d.left())
	}
	return int64(n), nil
}

func (d *headerReader) kv(i int64) (KV, error) {
	at := d.off
	key, err := d.str(fmt.Sprintf("metadata key %d", i))
	if err != nil {
		return KV{}, err
	}
	what := fmt.Sprintf("metadata %q (key %d at offset %d)", key, i, at)
	t, err := d.u32(what + " value_type")
	if err != nil {
		return KV{}, err
	}
	v, err := d.value(ValueType(t), 0, what)
	if err != nil {
		return KV{}, err
	}
	return KV{Key: key, Type: ValueType(t), Value: v}, nil
}

// fixedSize is the encoded size of a scalar value type, 0 for string and array, -1 if unknown.
func fixedSize(t ValueType) int64 {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	case TypeString, TypeArray:
		return 0
	}
	return -1
}

func minValueBytes(t ValueType) int64 {
	switch t {
	case TypeString:
		return minStringBytes
	case TypeArray:
		return minArrayBytes
	}
	return fixedSize(t)
}

// value reads one value of type t; depth counts the enclosing arrays.
func (d *headerReader) value(t ValueType, depth int, what string) (any, error) {
	switch t {
	case TypeUint8:
		return d.u8(what)
	case TypeInt8:
		v, err := d.u8(what)
		return int8(v), err
	case TypeBool:
		v, err := d.u8(what)
		return v != 0, err
	case TypeUint16:
		return d.u16(what)
	case TypeInt16:
		v, err := d.u16(what)
		return int16(v), err
	case TypeUint32:
		return d.u32(what)
	case TypeInt32:
		v, err := d.u32(what)
		return int32(v), err
	case TypeFloat32:
		v, err := d.u32(what)
		return math.Float32frombits(v), err
	case TypeUint64:
		return d.u64(what)
	case TypeInt64:
		v, err := d.u64(what)
		return int64(v), err
	case TypeFloat64:
		v, err := d.u64(what)
		return math.Float64frombits(v), err
	case TypeString:
		return d.str(what)
	case TypeArray:
		return d.array(depth, what)
	}
	return nil, fmt.Errorf("%s at offset %d: unknown value type %d", what, d.off-4, uint32(t))
}

func (d *headerReader) array(depth int, what string) (any, error) {
	at := d.off
	if depth >= maxArrayDepth {
		return nil, fmt.Errorf("%s at offset %d: arrays nested more than %d deep", what, at, maxArrayDepth)
	}
	et, err := d.u32(what + " array type")
	if err != nil {
		return nil, err
	}
	elem := ValueType(et)
	min := minValueBytes(elem)
	if min < 0 {
		return nil, fmt.Errorf("%s at offset %d: unknown array element type %d", what, at, et)
	}
	n, err := d.u64(what + " array length")
	if err != nil {
		return nil, err
	}
	if n > uint64(d.left()/min) {
		return nil, fmt.Errorf("%s at offset %d: array of %d %s cannot fit in the %d bytes left", what, at, n, elem, d.left())
	}
	a := Array{Elem: elem, Values: make([]any, n)}
	for i := range a.Values {
		if a.Values[i], err = d.value(elem, depth+1, what); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (d *headerReader) tensorInfo(i int64) (TensorInfo, error) {
	t := TensorInfo{InfoOffset: d.off}
	name, err := d.str(fmt.Sprintf("tensor %d name", i))
	if err != nil {
		return t, err
	}
	t.Name = name
	what := fmt.Sprintf("tensor %d %q (info at offset %d)", i, name, t.InfoOffset)
	if len(name) >= MaxNameLen {
		return t, fmt.Errorf("%s: name is %d bytes, ggml allows at most %d", what, len(name), MaxNameLen-1)
	}
	nDims, err := d.u32(what + " n_dims")
	if err != nil {
		return t, err
	}
	if nDims > MaxDims {
		return t, fmt.Errorf("%s: %d dimensions, ggml allows at most %d", what, nDims, MaxDims)
	}
	t.Dims = make([]int64, nDims)
	for j := range t.Dims {
		ne, err := d.u64(what + " ne")
		if err != nil {
			return t, err
		}
		if ne > math.MaxInt64 {
			return t, fmt.Errorf("%s: dimension %d has %d elements (negative as int64)", what, j, ne)
		}
		t.Dims[j] = int64(ne)
	}
	at := d.off
	typ, err := d.u32(what + " type")
	if err != nil {
		return t, err
	}
	t.Type = Type(typ)
	if !t.Type.Known() {
		return t, fmt.Errorf("%s: unknown ggml type %d at offset %d", what, typ, at)
	}
	off, err := d.u64(what + " offset")
	if err != nil {
		return t, err
	}
	if off > math.MaxInt64 {
		return t, fmt.Errorf("%s: data offset %d is out of range", what, off)
	}
	t.Offset = int64(off)
	return t, nil
}

// readAlignment applies general.alignment, which gguf.cpp requires to be a u32 power of two.
func (f *File) readAlignment() error {
	kv, ok := f.Get("general.alignment")
	if !ok {
		return nil
	}
	a, isU32 := kv.Value.(uint32)
	if !isU32 {
		return fmt.Errorf("metadata general.alignment is %s, not uint32", kv.Type)
	}
	if a == 0 || a&(a-1) != 0 {
		return fmt.Errorf("metadata general.alignment is %d, not a power of two", a)
	}
	f.Alignment = int64(a)
	return nil
}

// checkTensor checks t's element count, block alignment, offset alignment and extent.
func (f *File) checkTensor(t *TensorInfo) error {
	what := fmt.Sprintf("tensor %q (info at offset %d)", t.Name, t.InfoOffset)
	n := int64(1)
	for _, ne := range t.Dims {
		if ne != 0 && n > math.MaxInt64/ne {
			return fmt.Errorf("%s: shape %v has more than 2^63 elements", what, t.Dims)
		}
		n *= ne
	}
	bs, row := t.Type.BlockSize(), int64(1) // ggml reads absent dimensions as 1
	if len(t.Dims) > 0 {
		row = t.Dims[0]
	}
	if row%bs != 0 {
		return fmt.Errorf("%s: row length %d is not a multiple of %s's block of %d", what, row, t.Type, bs)
	}
	if n/bs > math.MaxInt64/t.Type.BlockBytes() {
		return fmt.Errorf("%s: %d elements of %s overflow int64 bytes", what, n, t.Type)
	}
	if t.Offset%f.Alignment != 0 {
		return fmt.Errorf("%s: data offset %d is not a multiple of the alignment %d", what, t.Offset, f.Alignment)
	}
	avail := f.Size - f.DataOffset
	if nb := t.Bytes(); t.Offset > avail || nb > avail-t.Offset {
		return fmt.Errorf("%s: data [%d, %d) at file offset %d is past the end of the file (%d bytes of data)",
			what, t.Offset, t.Offset+nb, f.DataOffset+t.Offset, max(avail, 0))
	}
	return nil
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }
