//go:build unix

package sft

import (
	"os"
	"syscall"
)

const canMap = true

// mapFile maps the first size bytes of f read-only (a zero-size file maps to nothing).
func mapFile(f *os.File, size int64) ([]byte, error) {
	if size == 0 {
		return []byte{}, nil
	}
	return syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmap(b []byte) {
	if len(b) > 0 {
		syscall.Munmap(b)
	}
}
