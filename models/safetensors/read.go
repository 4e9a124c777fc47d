package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
)

// maxHeaderBytes bounds the JSON header, as the reference implementation does (100 MB).
const maxHeaderBytes = 100 << 20

// ReadFile reads a whole safetensors file. The tensors' Data alias one buffer holding the file,
// so reading costs one copy of the file and no more; metadata is the header's "__metadata__".
func ReadFile(path string) (tensors map[string]*Tensor, metadata map[string]string, err error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("safetensors: %w", err)
	}
	return Parse(path, buf)
}

// File is a safetensors file opened with Open. Its tensors' Data point into a read-only memory
// map (where the platform has one), so they are valid until Close and must not be written to.
type File struct {
	Path     string
	Tensors  map[string]*Tensor
	Metadata map[string]string
	unmap    func() error
}

// Open memory-maps a safetensors file (falling back to reading it) and parses its header.
// Use it to convert a large checkpoint tensor by tensor without holding a copy of the file.
func Open(path string) (*File, error) {
	buf, unmap, err := mapFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	tensors, metadata, err := Parse(path, buf)
	if err != nil {
		_ = unmap()
		return nil, err
	}
	return &File{Path: path, Tensors: tensors, Metadata: metadata, unmap: unmap}, nil
}

// Close releases the memory map; the tensors' Data must not be used afterwards.
func (f *File) Close() error {
	if f.unmap == nil {
		return nil
	}
	err := f.unmap()
	f.unmap = nil
	f.Tensors = nil
	if err != nil {
		return fmt.Errorf("safetensors: unmap %s: %w", f.Path, err)
	}
	return nil
}

// headerEntry is one tensor's header record; pointers detect missing fields.
type headerEntry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int   `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

// Parse validates and splits the bytes of a safetensors file; name is used in error messages.
// The returned tensors' Data alias buf.
func Parse(name string, buf []byte) (map[string]*Tensor, map[string]string, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("safetensors %s: %s", name, fmt.Sprintf(format, args...))
	}
	if len(buf) < 8 {
		return nil, nil, fail("file is %d bytes, too short for the 8-byte header length (truncated?)", len(buf))
	}
	n := binary.LittleEndian.Uint64(buf)
	if n > uint64(len(buf)-8) {
		return nil, nil, fail("header length %d exceeds the %d bytes after it (truncated or not a safetensors file)", n, len(buf)-8)
	}
	if n > maxHeaderBytes {
		return nil, nil, fail("header length %d exceeds the %d-byte limit", n, maxHeaderBytes)
	}
	header, data := buf[8:8+n], buf[8+n:]
	if len(bytes.TrimSpace(header)) == 0 || bytes.TrimSpace(header)[0] != '{' {
		return nil, nil, fail("header is not a JSON object")
	}
	entries, order, metadata, err := decodeHeader(header)
	if err != nil {
		return nil, nil, fail("header: %v", err)
	}
	tensors := make(map[string]*Tensor, len(entries))
	for _, name := range order {
		t, err := entryTensor(name, entries[name], data)
		if err != nil {
			return nil, nil, fail("%v", err)
		}
		tensors[name] = t
	}
	if err := checkCoverage(order, entries, int64(len(data))); err != nil {
		return nil, nil, fail("%v", err)
	}
	return tensors, metadata, nil
}

// decodeHeader decodes the header object key by key, so that a duplicated tensor name is an
// error rather than silently the last one (encoding/json keeps the last duplicate).
func decodeHeader(header []byte) (map[string]headerEntry, []string, map[string]string, error) {
	dec := json.NewDecoder(bytes.NewReader(header))
	if _, err := dec.Token(); err != nil {
		return nil, nil, nil, err
	}
	entries := map[string]headerEntry{}
	var order []string
	var metadata map[string]string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil, err
		}
		key := tok.(string) // object keys are always strings
		if _, dup := entries[key]; dup || (key == "__metadata__" && metadata != nil) {
			return nil, nil, nil, fmt.Errorf("tensor %q appears twice", key)
		}
		if key == "__metadata__" {
			if err := dec.Decode(&metadata); err != nil {
				return nil, nil, nil, fmt.Errorf("__metadata__ must map strings to strings: %v", err)
			}
			if metadata == nil {
				metadata = map[string]string{}
			}
			continue
		}
		var e headerEntry
		if err := dec.Decode(&e); err != nil {
			return nil, nil, nil, fmt.Errorf("tensor %q: %v", key, err)
		}
		entries[key] = e
		order = append(order, key)
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, nil, errors.New("trailing data after the JSON object")
	}
	return entries, order, metadata, nil
}

// entryTensor checks one header record against the data section and slices its bytes.
func entryTensor(name string, e headerEntry, data []byte) (*Tensor, error) {
	switch {
	case name == "":
		return nil, errors.New("empty tensor name")
	case e.DType == nil:
		return nil, fmt.Errorf("tensor %q: missing dtype", name)
	case e.Shape == nil:
		return nil, fmt.Errorf("tensor %q: missing shape", name)
	case e.DataOffsets == nil:
		return nil, fmt.Errorf("tensor %q: missing data_offsets", name)
	case len(*e.DataOffsets) != 2:
		return nil, fmt.Errorf("tensor %q: data_offsets %v must be [begin, end]", name, *e.DataOffsets)
	}
	size, err := byteSize(*e.DType, *e.Shape)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %v", name, err)
	}
	begin, end := (*e.DataOffsets)[0], (*e.DataOffsets)[1]
	if begin < 0 || end < begin {
		return nil, fmt.Errorf("tensor %q: invalid data_offsets [%d, %d]", name, begin, end)
	}
	if end > int64(len(data)) {
		return nil, fmt.Errorf("tensor %q: data_offsets [%d, %d] run past the %d-byte data section (truncated?)", name, begin, end, len(data))
	}
	if end-begin != size {
		return nil, fmt.Errorf("tensor %q: %s%v needs %d bytes, data_offsets [%d, %d] span %d", name, *e.DType, *e.Shape, size, begin, end, end-begin)
	}
	return &Tensor{Name: name, DType: *e.DType, Shape: *e.Shape, Data: data[begin:end:end]}, nil
}

// checkCoverage requires the tensors to tile the data section exactly: ordered by offset, no
// overlap, no gap and no trailing bytes, as the reference implementation requires.
func checkCoverage(order []string, entries map[string]headerEntry, dataLen int64) error {
	byOffset := append([]string(nil), order...)
	off := func(name string) []int64 { return *entries[name].DataOffsets }
	sort.SliceStable(byOffset, func(i, j int) bool {
		a, b := off(byOffset[i]), off(byOffset[j])
		return a[0] < b[0] || (a[0] == b[0] && a[1] < b[1])
	})
	var pos int64
	prev := ""
	for _, name := range byOffset {
		o := off(name)
		switch {
		case o[0] < pos:
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] overlap tensor %q (which ends at %d)", name, o[0], o[1], prev, pos)
		case o[0] > pos:
			return fmt.Errorf("tensor %q: data_offsets [%d, %d] leave a gap after byte %d", name, o[0], o[1], pos)
		}
		pos, prev = o[1], name
	}
	if pos != dataLen {
		return fmt.Errorf("data section is %d bytes but the tensors cover %d", dataLen, pos)
	}
	return nil
}

// readAll is the portable fallback of mapFile.
func readAll(path string) ([]byte, func() error, error) {
	buf, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	return buf, func() error { return nil }, nil
}
