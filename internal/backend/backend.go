// Package backend selects the GoMLX backend in one place: the --backend flag, else $GOMLX_BACKEND,
// else the pure-Go "go" backend. It never triggers a network install implicitly: the XLA backend is
// used only when asked for by name.
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

var stdoutMu sync.Mutex

// New creates the backend for a configuration string as returned by Resolve ("go[:opts]",
// "xla:cuda", "xla:/abs/path/pjrt_plugin.so", ...). GoMLX panics are returned as errors.
func New(config string) (b backends.Backend, err error) {
	name, _, _ := strings.Cut(config, ":")
	switch name {
	case "go":
	case "xla", "stablehlo", "hlo", "shlo":
		if !xlaCompiled {
			return nil, fmt.Errorf("backend %q: this binary was built without XLA (-tags noxla or CGO_ENABLED=0); rebuild with cgo to use GPUs", config)
		}
	default:
		return nil, fmt.Errorf("backend %q: unknown backend %q; valid: go[:options], xla:cuda, xla:cpu, xla:/absolute/path/to/pjrt_plugin.so", config, name)
	}
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("backend %q: %v", config, r)
		}
	}()
	// simplego prints its parallelism setting on stdout; keep stdout clean for command output.
	stdoutMu.Lock()
	saved := os.Stdout
	if devnull, e := os.OpenFile(os.DevNull, os.O_WRONLY, 0); e == nil {
		os.Stdout = devnull
		defer devnull.Close()
	}
	b, err = backends.NewWithConfig(config)
	os.Stdout = saved
	stdoutMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", config, err)
	}
	return b, nil
}

// MustNew is New for tests and examples: it panics on error.
func MustNew(config string) backends.Backend {
	b, err := New(config)
	if err != nil {
		panic(err)
	}
	return b
}
