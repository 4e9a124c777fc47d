package backend

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
)

// Compile time is measured where it happens: Builder.Compile, which on XLA runs the whole PJRT
// compilation (seconds to tens of seconds per new shape of a large model) and on the pure-Go
// backend only prepares the graph. Every backend New returns wraps its builders to count them.

// compiled accumulates every compilation of every backend this process created: it is the
// process's instrumentation (like expvar), read by Compiled and reported by the CLI.
var compiled struct {
	n     atomic.Int64
	nanos atomic.Int64
}

// CompileStats are the graph compilations of the process so far.
type CompileStats struct {
	Graphs int           // Builder.Compile calls (one per graph and input shape)
	Time   time.Duration // wall time spent in them
}

// Compiled returns the compilations of every backend New created in this process so far.
func Compiled() CompileStats {
	return CompileStats{Graphs: int(compiled.n.Load()), Time: time.Duration(compiled.nanos.Load())}
}

// counting is a backend whose builders record their compile time.
type counting struct {
	backends.Backend
	plugin PluginInfo // the PJRT plugin CheckPlugin found for an XLA backend, else zero
	shared bool       // the process's client for its configuration (newXLA): never finalized
}

// Finalize implements backends.Backend: it frees the backend, unless it is the process's shared
// XLA client, which New returns again and which lives as long as the process.
func (c *counting) Finalize() {
	if !c.shared {
		c.Backend.Finalize()
	}
}

// Builder implements backends.Backend.
func (c *counting) Builder(name string) backends.Builder {
	b := c.Backend.Builder(name)
	if b == nil {
		return nil
	}
	return countingBuilder{b}
}

type countingBuilder struct{ backends.Builder }

// Compile implements backends.Builder, timing the backend's compilation.
func (b countingBuilder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	t0 := time.Now()
	exec, err := b.Builder.Compile(outputs, shardings)
	compiled.nanos.Add(int64(time.Since(t0)))
	compiled.n.Add(1)
	return exec, err
}

// Unwrap returns the backend GoMLX created (e.g. to type-assert a backend's own features).
func Unwrap(b backends.Backend) backends.Backend {
	if c, ok := b.(*counting); ok {
		return c.Backend
	}
	return b
}

// IsPureGo reports whether b is GoMLX's pure-Go backend (simplego), wrapped or not: the backend
// whose compilation is nearly free and whose matrix kernels the models lay their products out for.
func IsPureGo(b backends.Backend) bool {
	_, ok := Unwrap(b).(*simplego.Backend)
	return ok
}

// IsXLACPU reports whether b, wrapped or not, is an XLA backend whose device 0 is a CPU (a CPU
// PJRT plugin's devices are "cpu:0", "TFRT_CPU_0", ...).
func IsXLACPU(b backends.Backend) bool {
	u := Unwrap(b)
	return u.Name() == "xla" && u.NumDevices() > 0 && strings.Contains(strings.ToLower(u.DeviceDescription(0)), "cpu")
}

// AliasOutputToParameter implements backends.InputOutputAliaser where the wrapped builder does (XLA:
// an updated variable written into its donated buffer, third_party/README.md); elsewhere the hint is
// dropped and the output gets a buffer of its own.
func (b countingBuilder) AliasOutputToParameter(outputIdx int, parameter backends.Op) error {
	if a, ok := b.Builder.(backends.InputOutputAliaser); ok {
		return a.AliasOutputToParameter(outputIdx, parameter)
	}
	return nil
}
