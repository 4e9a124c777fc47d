package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
)

// builder writes GGUF files for the tests: header, KVs, tensor infos, padding and data, with
// every field under the test's control (so it can also write broken files).
type builder struct {
	version   uint32
	kvs       bytes.Buffer
	nKV       uint64
	infos     bytes.Buffer
	nTensors  uint64
	data      bytes.Buffer
	alignment int64
}

func newBuilder() *builder { return &builder{version: 3, alignment: DefaultAlignment} }

func putString(b *bytes.Buffer, s string) {
	binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

// kv adds a key with a raw, already encoded value of type t.
func (b *builder) kv(key string, t ValueType, raw []byte) *builder {
	putString(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(t))
	b.kvs.Write(raw)
	b.nKV++
	return b
}

func (b *builder) str(key, v string) *builder {
	var raw bytes.Buffer
	putString(&raw, v)
	return b.kv(key, TypeString, raw.Bytes())
}

func (b *builder) u32(key string, v uint32) *builder {
	return b.kv(key, TypeUint32, binary.LittleEndian.AppendUint32(nil, v))
}

func (b *builder) f32(key string, v float32) *builder {
	return b.kv(key, TypeFloat32, binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)))
}

func (b *builder) strs(key string, vs []string) *builder {
	var raw bytes.Buffer
	binary.Write(&raw, binary.LittleEndian, uint32(TypeString))
	binary.Write(&raw, binary.LittleEndian, uint64(len(vs)))
	for _, s := range vs {
		putString(&raw, s)
	}
	return b.kv(key, TypeArray, raw.Bytes())
}

func (b *builder) i32s(key string, vs []int32) *builder {
	var raw bytes.Buffer
	binary.Write(&raw, binary.LittleEndian, uint32(TypeInt32))
	binary.Write(&raw, binary.LittleEndian, uint64(len(vs)))
	binary.Write(&raw, binary.LittleEndian, vs)
	return b.kv(key, TypeArray, raw.Bytes())
}

// tensor adds a tensor of type t with ggml dims ne and its stored bytes, aligned.
func (b *builder) tensor(name string, t Type, ne []int64, data []byte) *builder {
	for int64(b.data.Len())%b.alignment != 0 {
		b.data.WriteByte(0)
	}
	putString(&b.infos, name)
	binary.Write(&b.infos, binary.LittleEndian, uint32(len(ne)))
	binary.Write(&b.infos, binary.LittleEndian, ne)
	binary.Write(&b.infos, binary.LittleEndian, uint32(t))
	binary.Write(&b.infos, binary.LittleEndian, uint64(b.data.Len()))
	b.data.Write(data)
	b.nTensors++
	return b
}

// f32Tensor adds an F32 tensor.
func (b *builder) f32Tensor(name string, ne []int64, v []float32) *builder {
	raw := make([]byte, 0, 4*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint32(raw, math.Float32bits(x))
	}
	return b.tensor(name, F32, ne, raw)
}

func (b *builder) bytes() []byte {
	var out bytes.Buffer
	out.WriteString(Magic)
	binary.Write(&out, binary.LittleEndian, b.version)
	binary.Write(&out, binary.LittleEndian, b.nTensors)
	binary.Write(&out, binary.LittleEndian, b.nKV)
	out.Write(b.kvs.Bytes())
	out.Write(b.infos.Bytes())
	for int64(out.Len())%b.alignment != 0 {
		out.WriteByte(0)
	}
	out.Write(b.data.Bytes())
	return out.Bytes()
}
