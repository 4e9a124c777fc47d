package sft

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"unsafe"
)

// exampleStore holds a run's tokenized examples (or packed rows) outside the Go heap, the way
// datasets keeps a tokenized dataset in memory-mapped Arrow files: written once to two files in
// the temporary directory as they are made, then mapped read-only into memory and unlinked, so the
// examples cost page cache the kernel can reclaim, not heap proportional to the dataset, and
// nothing is left on disk when the run ends however it ends. An example read back (at) is a view
// into the mapping: its slices must not be written. Where files cannot be mapped (or on a
// big-endian machine) the examples stay in memory.
type exampleStore struct {
	n int
	// building
	data, index *os.File
	dw, xw      *bufio.Writer
	off         int64
	// mapped
	dmap, xmap []byte
	// in memory (no mapping)
	mem []example
}

// indexRecord is one example's entry: data offset (8), token count (4), scored units (4),
// flags (4: 1 = first token scored as tokenized, 2 = segment ids follow the ids), padding (4).
const indexRecord = 24

const (
	flagFirst = 1 << iota
	flagSeg
)

// newExampleStore starts a store; inMemory keeps the examples on the heap (a few rows).
func newExampleStore(inMemory bool) (*exampleStore, error) {
	s := &exampleStore{}
	if inMemory || !canMap || !littleEndian() {
		return s, nil
	}
	var err error
	if s.data, err = os.CreateTemp("", "posttrain-sft-tokens-*"); err != nil {
		return nil, fmt.Errorf("sft: the tokenized examples' file: %w", err)
	}
	if s.index, err = os.CreateTemp("", "posttrain-sft-index-*"); err != nil {
		s.discard()
		return nil, fmt.Errorf("sft: the tokenized examples' index: %w", err)
	}
	s.dw, s.xw = bufio.NewWriterSize(s.data, 1<<20), bufio.NewWriterSize(s.index, 1<<16)
	return s, nil
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// add appends one example.
func (s *exampleStore) add(ex example) error {
	s.n++
	if s.data == nil {
		s.mem = append(s.mem, ex)
		return nil
	}
	n := len(ex.ids)
	var flags uint32
	if ex.first {
		flags |= flagFirst
	}
	if ex.seg != nil {
		flags |= flagSeg
	}
	var rec [indexRecord]byte
	binary.LittleEndian.PutUint64(rec[0:], uint64(s.off))
	binary.LittleEndian.PutUint32(rec[8:], uint32(n))
	binary.LittleEndian.PutUint32(rec[12:], uint32(ex.units))
	binary.LittleEndian.PutUint32(rec[16:], flags)
	if _, err := s.xw.Write(rec[:]); err != nil {
		return err
	}
	var b [4]byte
	for _, v := range ex.ids {
		binary.LittleEndian.PutUint32(b[:], uint32(v))
		s.dw.Write(b[:])
	}
	for _, v := range ex.seg {
		binary.LittleEndian.PutUint32(b[:], uint32(v))
		s.dw.Write(b[:])
	}
	for _, v := range ex.scored {
		if v {
			s.dw.WriteByte(1)
		} else {
			s.dw.WriteByte(0)
		}
	}
	size := int64(4*n + n)
	if ex.seg != nil {
		size += int64(4 * n)
	}
	for ; size%4 != 0; size++ { // keep every record's ids 4-byte aligned
		s.dw.WriteByte(0)
	}
	s.off += size
	return nil
}

// finish maps the written examples for reading; the store takes no more.
func (s *exampleStore) finish() error {
	if s.data == nil {
		return nil
	}
	defer s.discard()
	if err := s.dw.Flush(); err != nil {
		return fmt.Errorf("sft: writing the tokenized examples to %s: %w", s.data.Name(), err)
	}
	if err := s.xw.Flush(); err != nil {
		return fmt.Errorf("sft: writing the tokenized examples' index to %s: %w", s.index.Name(), err)
	}
	var err error
	if s.dmap, err = mapFile(s.data, s.off); err != nil {
		return fmt.Errorf("sft: mapping %s: %w", s.data.Name(), err)
	}
	if s.xmap, err = mapFile(s.index, int64(s.n)*indexRecord); err != nil {
		unmap(s.dmap)
		return fmt.Errorf("sft: mapping %s: %w", s.index.Name(), err)
	}
	dmap, xmap := s.dmap, s.xmap
	runtime.AddCleanup(s, func(struct{}) { unmap(dmap); unmap(xmap) }, struct{}{})
	return nil
}

// discard closes and removes the files (a mapping outlives both).
func (s *exampleStore) discard() {
	for _, f := range []*os.File{s.data, s.index} {
		if f != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}
	s.data, s.index, s.dw, s.xw = nil, nil, nil, nil
}

func (s *exampleStore) len() int { return s.n }

// at is example i: a view into the mapping (not to be written), or the example in memory.
func (s *exampleStore) at(i int) example {
	if s.xmap == nil {
		return s.mem[i]
	}
	r := s.xmap[i*indexRecord:]
	off := int(binary.LittleEndian.Uint64(r))
	n := int(binary.LittleEndian.Uint32(r[8:]))
	flags := binary.LittleEndian.Uint32(r[16:])
	ex := example{units: int(binary.LittleEndian.Uint32(r[12:])), first: flags&flagFirst != 0}
	if n == 0 {
		return ex
	}
	ex.ids = unsafe.Slice((*int32)(unsafe.Pointer(&s.dmap[off])), n)
	off += 4 * n
	if flags&flagSeg != 0 {
		ex.seg = unsafe.Slice((*int32)(unsafe.Pointer(&s.dmap[off])), n)
		off += 4 * n
	}
	ex.scored = unsafe.Slice((*bool)(unsafe.Pointer(&s.dmap[off])), n)
	return ex
}
