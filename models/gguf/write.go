package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
)

// OutTensor is one tensor to write: Dims in ggml's order (Dims[0] the fastest axis, the reverse
// of the PyTorch shape) and Data already encoded as Type (Quantize), or, with Data nil, Load to
// encode it when Write reaches it (the data is dropped once written: a file written tensor by
// tensor holds one tensor in memory).
type OutTensor struct {
	Name string
	Dims []int64
	Type Type
	Data []byte
	Load func() ([]byte, error)
}

// size is the bytes the tensor's data takes.
func (t *OutTensor) size() int64 {
	info := TensorInfo{Name: t.Name, Dims: t.Dims, Type: t.Type}
	return info.Bytes()
}

// bytes returns Data, or what Load returns, checked to be size long.
func (t *OutTensor) bytes() ([]byte, error) {
	data := t.Data
	if data == nil && t.Load != nil {
		var err error
		if data, err = t.Load(); err != nil {
			return nil, fmt.Errorf("gguf: tensor %q: %w", t.Name, err)
		}
	}
	if want := t.size(); int64(len(data)) != want {
		return nil, fmt.Errorf("gguf: tensor %q: %d bytes of data, %s %v needs %d", t.Name, len(data), t.Type, t.Dims, want)
	}
	return data, nil
}

// Write writes a GGUF v3 file (the layout of the package doc) to w: the metadata in the order
// given, the tensor infos, then the data, each tensor at a multiple of DefaultAlignment (gguf-py's
// GGUFWriter and gguf.cpp write the same bytes for the same keys and tensors).
func Write(w io.Writer, kvs []KV, tensors []OutTensor) error {
	e := &encoder{w: bufio.NewWriterSize(w, 1<<20)}
	e.raw([]byte(Magic))
	e.u32(3)
	e.u64(uint64(len(tensors)))
	e.u64(uint64(len(kvs)))
	for _, kv := range kvs {
		e.str(kv.Key)
		e.u32(uint32(kv.Type))
		if err := e.value(kv.Type, kv.Value, kv.Key); err != nil {
			return err
		}
	}
	var off int64
	for _, t := range tensors {
		if len(t.Name) >= MaxNameLen {
			return fmt.Errorf("gguf: tensor name %q is %d bytes, ggml allows at most %d", t.Name, len(t.Name), MaxNameLen-1)
		}
		size := t.size()
		if t.Data != nil || t.Load == nil {
			if int64(len(t.Data)) != size {
				return fmt.Errorf("gguf: tensor %q: %d bytes of data, %s %v needs %d", t.Name, len(t.Data), t.Type, t.Dims, size)
			}
		}
		e.str(t.Name)
		e.u32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			e.u64(uint64(d))
		}
		e.u32(uint32(t.Type))
		e.u64(uint64(off))
		off = alignUp(off+size, DefaultAlignment)
	}
	e.pad()
	for i := range tensors {
		if e.err != nil {
			break
		}
		data, err := tensors[i].bytes()
		if err != nil {
			return err
		}
		e.raw(data)
		e.pad()
	}
	if e.err != nil {
		return e.err
	}
	return e.w.Flush()
}

// WriteFile writes the GGUF to path through a temporary file in the same directory, renamed into
// place only when complete: an error leaves nothing at path (and an earlier file there untouched).
func WriteFile(path string, kvs []KV, tensors []OutTensor) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = Write(tmp, kvs, tensors); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	return nil
}

// encoder writes little-endian values, keeping the first error and the offset.
type encoder struct {
	w   *bufio.Writer
	off int64
	err error
	buf [8]byte
}

func (e *encoder) raw(p []byte) {
	if e.err != nil {
		return
	}
	n, err := e.w.Write(p)
	e.off += int64(n)
	e.err = err
}

func (e *encoder) u8(v uint8)   { e.buf[0] = v; e.raw(e.buf[:1]) }
func (e *encoder) u16(v uint16) { binary.LittleEndian.PutUint16(e.buf[:2], v); e.raw(e.buf[:2]) }
func (e *encoder) u32(v uint32) { binary.LittleEndian.PutUint32(e.buf[:4], v); e.raw(e.buf[:4]) }
func (e *encoder) u64(v uint64) { binary.LittleEndian.PutUint64(e.buf[:8], v); e.raw(e.buf[:8]) }
func (e *encoder) str(s string) { e.u64(uint64(len(s))); e.raw([]byte(s)) }

// pad writes zeros up to the next multiple of DefaultAlignment.
func (e *encoder) pad() {
	if n := alignUp(e.off, DefaultAlignment) - e.off; n > 0 {
		e.raw(make([]byte, n))
	}
}

// value writes v as type t; v is the Go type the reader returns for t (KV's doc), or an int for
// any integer type.
func (e *encoder) value(t ValueType, v any, key string) error {
	if n, isInt := v.(int); isInt {
		switch t {
		case TypeUint8, TypeInt8:
			v = uint8(n)
		case TypeUint16, TypeInt16:
			v = uint16(n)
		case TypeUint32, TypeInt32:
			v = uint32(n)
		case TypeUint64, TypeInt64:
			v = uint64(n)
		}
	}
	_, isStr := v.(string)
	_, isArr := v.(Array)
	_, isBool := v.(bool)
	_, isF32 := v.(float32)
	_, isF64 := v.(float64)
	size := sizeOfGo(v)
	ok := (t == TypeString && isStr) || (t == TypeArray && isArr) || (t == TypeBool && isBool) ||
		(t == TypeFloat32) == isF32 && (t == TypeFloat64) == isF64 && t != TypeBool && !isBool && size > 0 && size == fixedSize(t)
	if !ok {
		return fmt.Errorf("gguf: metadata %s: %T is not a %s", key, v, t)
	}
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case bool:
		if x {
			e.u8(1)
		} else {
			e.u8(0)
		}
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	case Array:
		e.u32(uint32(x.Elem))
		e.u64(uint64(len(x.Values)))
		for _, el := range x.Values {
			if err := e.value(x.Elem, el, key); err != nil {
				return err
			}
		}
	}
	return nil
}

// sizeOfGo is the encoded size of a scalar Go value, 0 for strings and arrays.
func sizeOfGo(v any) int64 {
	switch v.(type) {
	case uint8, int8, bool:
		return 1
	case uint16, int16:
		return 2
	case uint32, int32, float32:
		return 4
	case uint64, int64, float64:
		return 8
	}
	return 0
}
