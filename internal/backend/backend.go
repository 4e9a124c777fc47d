// Package backend selects the GoMLX backend in one place: the --backend flag, else $GOMLX_BACKEND,
// else xla:cpu when its PJRT plugin is installed (`make xla-cpu`) and loads, else the pure-Go "go"
// backend (Default). It never triggers a network install implicitly: GoMLX's plugin auto-install
// stays off unless $POSTTRAIN_XLA_AUTO_INSTALL=1 (see AutoInstallEnv).
//
// Before an XLA client is created, the PJRT plugin's C API version is read and compared with the
// one this binary's client speaks (go-xla's headers), so that an incompatible plugin fails with one
// error naming both versions instead of a crash deep inside the first call (Inspect, CheckPlugin).
// Every backend New returns counts its graph compilations and the time spent in them (Compiled),
// so that callers can report compile time apart from run time.
package backend

import (
	"errors"
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

// PureGo is the pure-Go backend's configuration. simplego's default worker pool deadlocks on 2
// CPUs (nested DotGeneral workers), so parallelism is unbounded.
const PureGo = "go:parallelism=-1"

// DefaultCPU is the backend chosen when neither --backend nor $GOMLX_BACKEND names one and its
// plugin is installed: XLA's CPU compiler runs the demo's training steps several times faster than
// the pure-Go backend (measured in docs/xla.md, "The default backend").
const DefaultCPU = "xla:cpu"

// defaultChoice is Default's decision and its reason, made once per process.
var defaultChoice = sync.OnceValues(func() (string, string) {
	return chooseDefault(xlaCompiled, HostProbe().NVIDIADevices, CheckPlugin)
})

// ErrNoPlugin is in the error of CheckPlugin when the plugin a configuration names is found
// nowhere (errors.Is).
var ErrNoPlugin = errors.New("no PJRT plugin found")

// DefaultGPU is the backend chosen when neither --backend nor $GOMLX_BACKEND names one and the
// machine has an NVIDIA GPU: XLA through JAX's CUDA plugin, which CheckPlugin finds (FindCUDA);
// where it is missing, creating the backend fails with one line saying what to install, never a
// silent run on the CPU beside an idle GPU.
const DefaultGPU = "xla:cuda"

// chooseDefault picks DefaultGPU when the binary has XLA and gpu says the machine has an NVIDIA
// GPU, else DefaultCPU when check finds its plugin usable, else PureGo, and says why in the words
// Describe prints.
func chooseDefault(compiled bool, gpu func() bool, check func(string) (PluginInfo, error)) (string, string) {
	if !compiled {
		return PureGo, "the default: this binary was built without XLA"
	}
	if gpu() {
		return DefaultGPU, "the default: an NVIDIA GPU is present; --backend xla:cpu or go to run on the CPU"
	}
	info, err := check(DefaultCPU)
	switch {
	case err == nil && info.Path != "":
		return DefaultCPU, "the default: its plugin is installed; --backend go for the pure-Go backend"
	case err == nil || errors.Is(err, ErrNoPlugin):
		return PureGo, "the default: no xla:cpu plugin installed (`make xla-cpu` installs one)"
	}
	return PureGo, "the default, since the installed xla:cpu plugin cannot be used: " + err.Error()
}

// Default returns the backend used when neither --backend nor $GOMLX_BACKEND is set: DefaultGPU on
// a machine with an NVIDIA GPU, else DefaultCPU when its PJRT plugin is found and passes
// CheckPlugin, else PureGo. A plugin that is found but
// unusable does not stop the command: the pure-Go backend runs and Describe says why.
func Default() string {
	cfg, _ := defaultChoice()
	return cfg
}

// Resolve returns the backend configuration to use: flag, else $GOMLX_BACKEND, else Default().
// A bare "go" (or "go:" options without parallelism/ops_sequential) gets parallelism=-1 added.
func Resolve(flag string) string {
	cfg := strings.TrimSpace(flag)
	if cfg == "" {
		cfg = strings.TrimSpace(os.Getenv(EnvVar))
	}
	if cfg == "" {
		return Default()
	}
	return withParallelism(cfg)
}

// withParallelism adds parallelism=-1 to a pure-Go configuration that sets neither it nor
// ops_sequential.
func withParallelism(cfg string) string {
	name, opts, _ := strings.Cut(cfg, ":")
	if name == "go" && !strings.Contains(opts, "parallelism") && !strings.Contains(opts, "ops_sequential") {
		if opts == "" {
			return PureGo
		}
		return "go:parallelism=-1," + opts
	}
	return cfg
}

// Describe is the one line a command prints about the backend it runs on, for the --backend value
// flag it was given and b, the backend New made of it (nil: none made yet, the plugin is checked
// again): the configuration, its plugin file and PJRT C API version (XLA), and where the choice
// came from (--backend, $GOMLX_BACKEND, or the default and why).
func Describe(flag string, b backends.Backend) string {
	cfg := Resolve(flag)
	var what string
	if name, _, _ := strings.Cut(cfg, ":"); name == "go" {
		what = "pure Go"
	} else {
		info, err := PluginInfo{}, error(nil)
		if c, ok := b.(*counting); ok {
			info = c.plugin
		} else {
			info, err = CheckPlugin(cfg)
		}
		if err == nil && info.Path != "" {
			what = "PJRT plugin " + info.Path + ", C API " + info.API
		} else {
			what = "PJRT plugin chosen by GoMLX"
		}
	}
	var from string
	switch {
	case strings.TrimSpace(flag) != "":
		from = "--backend"
	case strings.TrimSpace(os.Getenv(EnvVar)) != "":
		from = "$" + EnvVar
	default:
		_, from = defaultChoice()
	}
	return fmt.Sprintf("backend: %s (%s; %s)", cfg, what, from)
}

// PluginFile is the file name a plugin named name has in a plugin directory (go-xla's naming).
func PluginFile(name string) string { return "pjrt_c_api_" + name + "_plugin.so" }

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
	// GPU are a CUDA plugin's client options and environment (memory fraction, determinism,
	// TF32). CUDA plugins only.
	GPU GPUOptions
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
