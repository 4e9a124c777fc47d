//go:build !unix

package checkpoint

import (
	"errors"
	"os"
)

var errLocked = errors.New("locked")

// tryLock: advisory locks are only taken where flock exists (Linux, macOS, the BSDs); elsewhere
// an output directory is not protected against a second run.
func tryLock(*os.File, bool) error { return nil }
