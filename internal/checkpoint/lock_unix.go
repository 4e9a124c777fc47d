//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is tryLock's answer when another open file description holds the lock.
var errLocked = errors.New("locked")

// tryLock takes f's flock, exclusive or shared, without waiting.
func tryLock(f *os.File, exclusive bool) error {
	how := syscall.LOCK_SH
	if exclusive {
		how = syscall.LOCK_EX
	}
	err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}
