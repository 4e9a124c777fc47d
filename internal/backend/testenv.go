package backend

import (
	"os"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
)

// TestEnv names the backend the numerics-bearing tests run on (e.g. "xla:cpu"); unset, they run
// on the pure-Go backend (PureGo), whatever plugin is installed. Tests read it only through ForTests, so that one variable moves every such test
// (`POSTTRAIN_TEST_BACKEND=xla:cpu go test ./models/decoder`, `make unit-xla`); $GOMLX_BACKEND is
// deliberately not read, so a shell's setting for the CLI does not change what `go test` checks.
const TestEnv = "POSTTRAIN_TEST_BACKEND"

// ForTests returns the backend configuration for tests: $POSTTRAIN_TEST_BACKEND resolved as a
// --backend flag would be (a bare "go" gets parallelism=-1), else PureGo.
func ForTests() string {
	if cfg := strings.TrimSpace(os.Getenv(TestEnv)); cfg != "" {
		return Resolve(cfg)
	}
	return PureGo
}

// MustNewForTests is MustNew(ForTests()): the backend of a test. A named backend that cannot be
// created (no plugin installed, say) panics, so the test fails rather than silently running on
// another backend.
func MustNewForTests() backends.Backend { return MustNew(ForTests()) }

// SharedForTests is the tests' backend (MustNewForTests), made once per test binary and shared by
// every caller: do not Finalize it.
func SharedForTests() backends.Backend { return sharedForTests() }

var sharedForTests = sync.OnceValue(MustNewForTests)
