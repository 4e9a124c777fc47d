// Package fsmode creates the temporary files and directories that posttrain's atomic writes rename
// into place, with the modes a user expects of output files: os.CreateTemp and os.MkdirTemp create
// 0600 files and 0700 directories (private, since they are meant for /tmp), which a rename then
// carries into OUTPUT_DIR, so that a checkpoint or training_args.yaml was unreadable to the other
// users of a shared machine. These create 0666 files and 0777 directories less the process's umask
// (0644 and 0755 under the usual umask 022), as os.Create and os.Mkdir do and as HF's Trainer
// leaves its outputs.
package fsmode

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CreateTemp is os.CreateTemp with mode 0666 (less umask): a new file in dir whose name is pattern
// with its last "*" (or its end) replaced by a random string.
func CreateTemp(dir, pattern string) (*os.File, error) {
	var f *os.File
	err := unique(dir, pattern, func(path string) error {
		var err error
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		return err
	})
	return f, err
}

// MkdirTemp is os.MkdirTemp with mode 0777 (less umask).
func MkdirTemp(dir, pattern string) (string, error) {
	var name string
	err := unique(dir, pattern, func(path string) error {
		name = path
		return os.Mkdir(path, 0o777)
	})
	return name, err
}

// unique calls create on fresh names until one does not exist yet.
func unique(dir, pattern string, create func(path string) error) error {
	if dir == "" {
		dir = os.TempDir()
	}
	if strings.ContainsRune(pattern, os.PathSeparator) {
		return &os.PathError{Op: "createtemp", Path: pattern, Err: errors.New("pattern contains path separator")}
	}
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for range 10000 {
		path := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		err := create(path)
		if !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return &os.PathError{Op: "createtemp", Path: filepath.Join(dir, pattern), Err: os.ErrExist}
}

// FreeBytes is the space an unprivileged user may still write on the filesystem where path is or
// would be created (the nearest existing directory above it), and false where it cannot be told.
func FreeBytes(path string) (int64, bool) {
	p := filepath.Clean(path)
	for {
		if _, err := os.Stat(p); err == nil {
			return statFree(p)
		}
		up := filepath.Dir(p)
		if up == p {
			return 0, false
		}
		p = up
	}
}
