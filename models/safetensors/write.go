package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/posttrain/posttrain/internal/fsmode"
)

// WriteFile writes tensors as one safetensors file the way HuggingFace does: "__metadata__" first
// (when non-empty), then the tensors sorted by name with their data in that order, and the header
// padded with spaces to a multiple of 8 bytes. It writes a temporary file in the same directory
// and renames it, so path is either the old file or the complete new one. A lazy tensor
// (Stream) is streamed when its turn comes.
func WriteFile(path string, tensors []*Tensor, metadata map[string]string) error {
	header, sorted, err := encodeHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("safetensors %s: %w", path, err)
	}
	return writeAtomic(path, func(w *bufio.Writer) error {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(header)))
		if _, err := w.Write(n[:]); err != nil {
			return err
		}
		if _, err := w.Write(header); err != nil {
			return err
		}
		for _, t := range sorted {
			if err := t.WriteData(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// encodeHeader validates the tensors and returns the padded header and the tensors in file order.
func encodeHeader(tensors []*Tensor, metadata map[string]string) ([]byte, []*Tensor, error) {
	sorted := append([]*Tensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var buf bytes.Buffer
	buf.WriteByte('{')
	if len(metadata) > 0 {
		m := jsonString(metadata) // keys sorted
		buf.WriteString(`"__metadata__":`)
		buf.Write(m)
	}
	var offset int64
	for i, t := range sorted {
		switch {
		case t == nil:
			return nil, nil, fmt.Errorf("nil tensor")
		case t.Name == "" || t.Name == "__metadata__":
			return nil, nil, fmt.Errorf("invalid tensor name %q", t.Name)
		case i > 0 && sorted[i-1].Name == t.Name:
			return nil, nil, fmt.Errorf("tensor %q appears twice", t.Name)
		}
		if err := t.check(); err != nil {
			return nil, nil, err
		}
		if buf.Len() > 1 {
			buf.WriteByte(',')
		}
		name := jsonString(t.Name)
		shape := jsonString(append([]int{}, t.Shape...)) // a scalar is [], not null

		n, _ := t.ByteSize() // checked by t.check above
		end := offset + n
		fmt.Fprintf(&buf, `%s:{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}`, name, t.DType, shape, offset, end)
		offset = end
	}
	buf.WriteByte('}')
	for buf.Len()%8 != 0 {
		buf.WriteByte(' ')
	}
	return buf.Bytes(), sorted, nil
}

// writeAtomic writes path through a temporary file in the same directory, synced then renamed.
func writeAtomic(path string, write func(*bufio.Writer) error) (err error) {
	f, err := fsmode.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	if err = write(w); err != nil {
		return err
	}
	if err = w.Flush(); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// jsonString encodes v compactly without HTML escaping (as serde_json writes "<", ">" and "&").
func jsonString(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // strings, string maps and int slices always encode
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}
