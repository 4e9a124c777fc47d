//go:build !noxla

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/apps/bench"
	"github.com/posttrain/posttrain/internal/backend"
)

// With the pinned XLA CPU plugin installed (make xla-cpu), `bench backend --backend xla:cpu
// --devices 2` names the plugin and its versions, lists two devices and runs the graph on each.
func TestBenchBackend_XLACPUDevices(t *testing.T) {
	if _, err := backend.CheckPlugin("xla:cpu"); err != nil {
		t.Skipf("no XLA CPU plugin installed (run `make xla-cpu`): %v", err)
	}
	rc, stdout, stderr := runFilesOut(t, "bench", "backend", "--backend", "xla:cpu", "--devices", "2")
	if rc != 0 {
		t.Fatalf("exit %d: %s", rc, stderr)
	}
	var res bench.BackendResult
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, stdout)
	}
	if !strings.HasSuffix(res.PluginPath, "pjrt_c_api_cpu_plugin.so") || !strings.HasPrefix(res.PluginAPI, "0.") {
		t.Errorf("plugin %q, API %q", res.PluginPath, res.PluginAPI)
	}
	if res.StableHLO == "" || res.XLAVersion == "" {
		t.Errorf("StableHLO %q, xla_version %q: the plugin's attributes are not reported", res.StableHLO, res.XLAVersion)
	}
	if len(res.Devices) != 2 || len(res.Runs) != 2 || res.Runs[1].OutputDevice != 1 {
		t.Errorf("devices %q, runs %+v; want 2 devices and a run on each", res.Devices, res.Runs)
	}
	if res.CompileS <= 0 || res.RunS <= 0 || res.MaxAbsErr > 1e-4 {
		t.Errorf("compile %gs, run %gs, max |Δ| %g", res.CompileS, res.RunS, res.MaxAbsErr)
	}
	for _, want := range []string{res.PluginPath, "StableHLO " + res.StableHLO, "2 devices", "compiled in"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("progress on stderr does not name %q:\n%s", want, stderr)
		}
	}
}

// A bad plugin, or none: one line on stderr naming the file (or what was searched) and the
// client's API version, a non-zero exit, nothing on stdout.
func TestBenchBackend_BadPluginOneLine(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "pjrt_c_api_garbage_plugin.so")
	if err := os.WriteFile(garbage, []byte("not an ELF file"), 0o755); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	t.Setenv(backend.PluginDirEnv, empty)
	for _, c := range []struct{ backend, want string }{
		{"xla:" + garbage, garbage},
		{"xla:nosuchplugin", empty},
	} {
		rc, stdout, stderr := runFilesOut(t, "bench", "backend", "--backend", c.backend)
		if rc == 0 || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want a failure and nothing written", c.backend, rc, stdout)
		}
		if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "posttrain's client "+backend.ClientAPI) {
			t.Errorf("%s: stderr %q; want one line naming %s and the client's API", c.backend, stderr, c.want)
		}
	}
}
