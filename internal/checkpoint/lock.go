package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// LockName is the file in an output directory that a run holds an advisory lock on (flock) while
// it uses the directory; it holds the run's pid. The kernel releases the lock when the process
// ends, however it ends, so a killed run never blocks the next one. The file stays (removing it
// would let a waiting process lock a file that no longer has a name).
const LockName = ".posttrain.lock"

// locks are the output directories this process holds, by resolved path: a second Lock of the
// same directory by the same process (the CLI, then the driver) shares the first one, since two
// flocks of one file by one process would refuse each other.
var locks = struct {
	sync.Mutex
	held map[string]*heldLock
}{held: map[string]*heldLock{}}

type heldLock struct {
	f     *os.File
	count int
}

// Lock takes dir's lock for this process, creating dir when it is missing, and returns its
// release. When another process holds it, the error names the directory and the holder's pid.
func Lock(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("output_dir: %w", err)
	}
	key, err := lockKey(dir)
	if err != nil {
		return nil, fmt.Errorf("output_dir: %w", err)
	}
	locks.Lock()
	defer locks.Unlock()
	if h, ok := locks.held[key]; ok {
		h.count++
		return releaser(key), nil
	}
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("output_dir: lock: %w", err)
	}
	if err := tryLock(f, true); err != nil {
		f.Close()
		if errors.Is(err, errLocked) {
			return nil, inUse(dir, path)
		}
		return nil, fmt.Errorf("output_dir: lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	locks.held[key] = &heldLock{f: f, count: 1}
	return releaser(key), nil
}

// releaser drops one hold of key's lock; the last one unlocks the file.
func releaser(key string) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			locks.Lock()
			defer locks.Unlock()
			h := locks.held[key]
			if h == nil {
				return
			}
			if h.count--; h.count == 0 {
				h.f.Close() // closing the last descriptor releases the flock
				delete(locks.held, key)
			}
		})
	}
}

// CheckUnlocked returns an error naming the holder when another process holds dir's lock; it
// never creates the lock file (for writers that must not touch a live run's directory).
func CheckUnlocked(dir string) error {
	path := filepath.Join(dir, LockName)
	f, err := os.Open(path)
	if err != nil {
		return nil // no lock file: no run ever held it
	}
	defer f.Close()
	if err := tryLock(f, false); err != nil {
		if errors.Is(err, errLocked) {
			if key, err := lockKey(dir); err == nil {
				locks.Lock()
				_, mine := locks.held[key]
				locks.Unlock()
				if mine {
					return nil
				}
			}
			return inUse(dir, path)
		}
		return nil
	}
	return nil // closing f releases the shared lock
}

// lockKey is dir's absolute path with symbolic links resolved: one directory, one key.
func lockKey(dir string) (string, error) {
	p, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// inUse is the refusal naming the lock's holder.
func inUse(dir, path string) error {
	pid := "unknown pid"
	if b, err := os.ReadFile(path); err == nil {
		if s := strings.TrimSpace(string(b)); s != "" {
			pid = "pid " + s
		}
	}
	return fmt.Errorf("output_dir %s is in use by another posttrain run (%s holds %s): wait for it to end, or stop it", dir, pid, LockName)
}
