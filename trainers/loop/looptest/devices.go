package looptest

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

// DevicesBackend is XLA's CPU plugin with 4 devices for the data-parallel tests, whatever
// $POSTTRAIN_TEST_BACKEND says; they are skipped unless the tests run on XLA (make unit-xla) and
// the plugin is installed. (trainers/loop's own tests keep a copy: they cannot import this
// package, which imports loop.)
func DevicesBackend(t testing.TB) backends.Backend {
	t.Helper()
	if !backend.IsXLA(backend.ForTests()) {
		t.Skipf("data parallel runs on XLA's CPU devices: with %s=xla:cpu (make unit-xla)", backend.TestEnv)
	}
	b, err := cpuDevices()
	if errors.Is(err, backend.ErrNoPlugin) {
		t.Skipf("data parallel needs several devices: XLA's CPU plugin is not installed (make xla-cpu): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}
