// Package devicetest gives the tests that run graphs over several devices XLA's CPU plugin with
// 4 devices (its cpu_device_count).
package devicetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/internal/backend"
)

// cpuDevices is XLA's CPU plugin with 4 devices, made once per test binary.
var cpuDevices = sync.OnceValues(func() (backends.Backend, error) {
	return backend.NewWithOptions("xla:cpu", backend.Options{CPUDevices: 4})
})

// DevicesBackend is XLA's CPU plugin with 4 devices, whatever $POSTTRAIN_TEST_BACKEND says (the
// pure-Go backend has one device); the tests are skipped unless they run on XLA (make unit-xla)
// and the plugin is installed.
func DevicesBackend(t testing.TB) backends.Backend {
	t.Helper()
	if !backend.IsXLA(backend.ForTests()) {
		t.Skipf("several devices: XLA's CPU devices, with %s=xla:cpu (make unit-xla)", backend.TestEnv)
	}
	b, err := cpuDevices()
	if errors.Is(err, backend.ErrNoPlugin) {
		t.Skipf("several devices: XLA's CPU plugin is not installed (make xla-cpu): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}
