//go:build linux || darwin

package fsmode

import "syscall"

// statFree is the bytes an unprivileged user may still write on the filesystem holding path.
func statFree(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true // Bsize is int64 on Linux, uint32 on macOS
}
