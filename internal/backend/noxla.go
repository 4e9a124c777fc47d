//go:build noxla

package backend

import (
	"errors"

	"github.com/gomlx/gomlx/backends"
)

const xlaCompiled = false

// ClientAPI is empty: this binary has no PJRT client.
var ClientAPI = "none (built without XLA)"

// PluginInfo is what CheckPlugin learned about the PJRT plugin of an XLA configuration.
type PluginInfo struct {
	Name, Path   string
	Major, Minor int
	API          string
	TableSize    int
}

// CheckPlugin fails: this binary has no XLA backend.
func CheckPlugin(config string) (PluginInfo, error) {
	return PluginInfo{}, errors.New("backend " + config + ": this binary was built without XLA")
}

func newXLA(config string, _ PluginInfo, _ Options) (backends.Backend, error) {
	return nil, errors.New("backend " + config + ": this binary was built without XLA")
}

// PluginDirs is empty: this binary has no XLA backend.
func PluginDirs() []string { return nil }

// PluginAttributes is nil: this binary has no XLA backend.
func PluginAttributes(string) map[string]any { return nil }

// AutoInstallAllowed says whether $POSTTRAIN_XLA_AUTO_INSTALL lets GoMLX download PJRT plugins.
// AutoInstallAllowed is false: this binary has no XLA backend.
func AutoInstallAllowed() bool { return false }

// Adaptations is nil: this binary has no XLA backend.
func Adaptations(string, PluginInfo) []string { return nil }

// CompileCacheHits is 0: this binary has no XLA backend.
func CompileCacheHits(backends.Backend) int { return 0 }
