// Package backend selects the GoMLX backend in one place: the --backend flag, else $GOMLX_BACKEND,
// else the pure-Go "go" backend. It never triggers a network install implicitly: the XLA backend is
// used only when asked for by name, and GoMLX's plugin auto-install stays off unless
// $POSTTRAIN_XLA_AUTO_INSTALL=1 (see AutoInstallEnv).
//
// Before an XLA client is created, the PJRT plugin's C API version is read and compared with the
// one this binary's client speaks (go-xla's headers), so that an incompatible plugin fails with one
// error naming both versions instead of a crash deep inside the first call (Inspect, CheckPlugin).
// Every backend New returns counts its graph compilations and the time spent in them (Compiled),
// so that callers can report compile time apart from run time.
package backend

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	_ "github.com/gomlx/gomlx/backends/simplego" // registers "go"
)

// EnvVar is GoMLX's environment variable for the backend configuration.
const EnvVar = backends.ConfigEnvVar

// AutoInstallEnv, set to 1 (or true/yes), lets GoMLX download and install PJRT plugins when an XLA
// backend is named without an absolute path (GoMLX's default; off in posttrain, since an offline
// GPU box would fail on the download and an online one would fetch whatever is latest).
const AutoInstallEnv = "POSTTRAIN_XLA_AUTO_INSTALL"

// Default is the backend used when neither --backend nor $GOMLX_BACKEND is set. simplego's default
// worker pool deadlocks on 2 CPUs (nested DotGeneral workers), so parallelism is unbounded.
const Default = "go:parallelism=-1"

// Resolve returns the backend configuration to use: flag, else $GOMLX_BACKEND, else Default.
// A bare "go" (or "go:" options without parallelism/ops_sequential) gets parallelism=-1 added.
func Resolve(flag string) string {
	cfg := strings.TrimSpace(flag)
	if cfg == "" {
		cfg = strings.TrimSpace(os.Getenv(EnvVar))
	}
	if cfg == "" {
		return Default
	}
	name, opts, _ := strings.Cut(cfg, ":")
	if name == "go" && !strings.Contains(opts, "parallelism") && !strings.Contains(opts, "ops_sequential") {
		if opts == "" {
			return Default
		}
		return "go:parallelism=-1," + opts
	}
	return cfg
}

// IsXLA says whether a configuration names GoMLX's XLA backend (or one of its aliases).
func IsXLA(config string) bool {
	name, _, _ := strings.Cut(config, ":")
	switch name {
	case "xla", "stablehlo", "hlo", "shlo":
		return true
	}
	return false
}

// Options are client options of a backend beyond its configuration string.
type Options struct {
	// CPUDevices, when > 0, is the number of devices an XLA CPU plugin creates (its
	// "cpu_device_count" client option; XLA's CPU plugin makes 4 by default). XLA only.
	CPUDevices int
}

// New creates the backend for a configuration string as returned by Resolve ("go[:opts]",
// "xla:cpu", "xla:cuda", "xla:/abs/path/pjrt_plugin.so", ...). GoMLX panics are returned as errors.
// For XLA, the plugin is found and checked first (CheckPlugin) and named in any error.
func New(config string) (backends.Backend, error) { return NewWithOptions(config, Options{}) }

// NewWithOptions is New with client options.
func NewWithOptions(config string, opt Options) (backends.Backend, error) {
	name, _, _ := strings.Cut(config, ":")
	switch {
	case name == "go":
		if opt.CPUDevices > 0 {
			return nil, fmt.Errorf("backend %q: a device count is an XLA CPU plugin option; the pure-Go backend has one device", config)
		}
		return create(config, backends.NewWithConfig)
	case IsXLA(config):
		if !xlaCompiled {
			return nil, fmt.Errorf("backend %q: this binary was built without XLA (-tags noxla or CGO_ENABLED=0); rebuild with cgo to use GPUs", config)
		}
		info, err := CheckPlugin(config)
		if err != nil {
			return nil, err
		}
		return newXLA(config, info, opt)
	}
	return nil, fmt.Errorf("backend %q: unknown backend %q; valid: go[:options], xla:cpu, xla:cuda, xla:/absolute/path/to/pjrt_plugin.so", config, name)
}

// stdoutMu serializes the stdout redirection of create.
var stdoutMu sync.Mutex

// create runs construct(config) with stdout sent to /dev/null (simplego prints its parallelism
// setting there; command output must stay clean) and returns its backend wrapped to count
// compilations. On every path, a panic included, stdout is restored and the lock released.
func create(config string, construct func(string) (backends.Backend, error)) (b backends.Backend, err error) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	saved := os.Stdout
	defer func() { os.Stdout = saved }()
	if devnull, e := os.OpenFile(os.DevNull, os.O_WRONLY, 0); e == nil {
		os.Stdout = devnull
		defer devnull.Close()
	}
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("backend %q: %v", config, r)
		}
	}()
	inner, err := construct(config)
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	if inner == nil {
		return nil, fmt.Errorf("backend %q: no backend created", config)
	}
	return &counting{Backend: inner}, nil
}

// MustNew is New for tests and examples: it panics on error.
func MustNew(config string) backends.Backend {
	b, err := New(config)
	if err != nil {
		panic(err)
	}
	return b
}
