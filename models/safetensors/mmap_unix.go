//go:build linux || darwin

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps path read-only; an empty or unmappable file falls back to os.ReadFile.
func mapFile(path string) ([]byte, func() error, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size <= 0 || int64(int(size)) != size || !st.Mode().IsRegular() {
		return readAll(path)
	}
	buf, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return readAll(path)
	}
	return buf, func() error {
		if err := syscall.Munmap(buf); err != nil {
			return fmt.Errorf("munmap: %w", err)
		}
		return nil
	}, nil
}
