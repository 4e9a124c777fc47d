//go:build !noxla

package backend

import (
	"os"
	"testing"
)

// needCPUPlugin skips a test that needs the installed xla:cpu plugin where it is missing, except
// in CI (CI=true), where .ci/run installs it and a missing plugin is a failure.
func needCPUPlugin(t *testing.T) {
	t.Helper()
	info, err := CheckPlugin(DefaultCPU)
	if err != nil || info.Path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the xla:cpu plugin is not installed: %v", err)
		}
		t.Skipf("xla:cpu plugin not installed (make xla-cpu): %v", err)
	}
}
