//go:build !noxla

package backend

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The client's API version constants are go-xla's header's.
func TestClientAPIMatchesHeader(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gomlx/go-xla").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	h, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "pkg", "pjrt", "pjrt_c_api.h"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{"PJRT_API_MAJOR": ClientAPIMajor, "PJRT_API_MINOR": ClientAPIMinor} {
		m := regexp.MustCompile(`#define ` + name + ` (\d+)`).FindSubmatch(h)
		if m == nil || string(m[1]) != fmt.Sprint(want) {
			t.Errorf("%s: header says %q, the constant is %d", name, m, want)
		}
	}
}

// fakePlugin compiles a shared library exporting GetPjrtApi with the given API version and a
// PJRT_Api table as large as the 0.83 header's (or, with major < 0, no GetPjrtApi at all) and
// returns its path.
func fakePlugin(t *testing.T, major, minor int) string {
	t.Helper()
	return fakePluginTable(t, major, minor, 1000)
}

// fakePluginTable is fakePlugin whose PJRT_Api says its table is tableBytes long.
func fakePluginTable(t *testing.T, major, minor, tableBytes int) string {
	t.Helper()
	code := "int not_pjrt(void) { return 0; }\n"
	if major >= 0 {
		code = fmt.Sprintf(`#include <stddef.h>
typedef struct { size_t struct_size; void* ext; int major; int minor; } v;
typedef struct { size_t struct_size; void* ext; v version; void* fns[120]; } api;
static api the_api = { %d, 0, { sizeof(v), 0, %d, %d }, { 0 } };
const api* GetPjrtApi(void) { return &the_api; }
`, tableBytes, major, minor)
	}
	return compileSO(t, t.TempDir(), "pjrt_c_api_fake_plugin.so", code)
}

// compileSO compiles C code into dir/name as a shared library (extra: gcc arguments after it).
func compileSO(t *testing.T, dir, name, code string, extra ...string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: the fake plugins are compiled C")
	}
	src := filepath.Join(dir, name+".c")
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	so := filepath.Join(dir, name)
	args := append([]string{"-shared", "-fPIC", "-o", so, src}, extra...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return so
}

func TestCheckPluginReadsTheAPIVersion(t *testing.T) {
	for _, c := range []struct{ major, minor int }{{0, 83}, {0, 97}, {0, 60}} {
		so := fakePlugin(t, c.major, c.minor)
		info, err := CheckPlugin("xla:" + so + ",noshared_buffers")
		if err != nil {
			t.Fatalf("%d.%d: %v", c.major, c.minor, err)
		}
		if want := fmt.Sprintf("%d.%d", c.major, c.minor); info.API != want || info.Path != so {
			t.Errorf("CheckPlugin = %+v, want API %s at %s", info, want, so)
		}
	}
}

// A plugin of another major version is refused before the client touches it, in one line naming
// both versions (New too: it never reaches the plugin's functions, which this fake lacks).
func TestIncompatiblePluginNamesBothVersions(t *testing.T) {
	so := fakePlugin(t, 1, 2)
	for _, f := range []func() error{
		func() error { _, err := CheckPlugin("xla:" + so); return err },
		func() error { _, err := New("xla:" + so); return err },
	} {
		err := f()
		if err == nil {
			t.Fatal("a plugin of API 1.2 was accepted")
		}
		msg := err.Error()
		for _, want := range []string{"1.2", fmt.Sprintf("%d.%d", ClientAPIMajor, ClientAPIMinor), so} {
			if !strings.Contains(msg, want) {
				t.Errorf("error %q does not name %q", msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("error is not one line: %q", msg)
		}
	}
}

func TestCheckPluginBadFiles(t *testing.T) {
	notPJRT := fakePlugin(t, -1, 0)
	garbage := filepath.Join(t.TempDir(), "garbage.so")
	if err := os.WriteFile(garbage, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		notPJRT:                  "exports no GetPjrtApi",
		garbage:                  "not an ELF shared library",
		"/nonexistent/plugin.so": "no such file",
		t.TempDir():              "is a directory",
	} {
		_, err := New("xla:" + path)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(xla:%s) = %v, want an error containing %q", path, err, want)
		}
	}
}

// A plugin named (not a path) that is not installed is an error saying how to proceed; GoMLX's
// network auto-install is not attempted.
func TestNamedPluginNotFoundDoesNotInstall(t *testing.T) {
	if AutoInstallAllowed() {
		t.Skipf("$%s allows auto-install", AutoInstallEnv)
	}
	_, err := New("xla:nosuchplatform")
	if err == nil {
		t.Fatal("no error")
	}
	if !errors.Is(err, ErrNoPlugin) {
		t.Errorf("error %q is not ErrNoPlugin (the default backend tells a missing plugin from a broken one by it)", err)
	}
	if _, err := CheckPlugin("xla:" + filepath.Join(t.TempDir(), "missing.so")); err == nil || errors.Is(err, ErrNoPlugin) {
		t.Errorf("a named file that is missing: %v; want an error that is not ErrNoPlugin", err)
	}
	for _, want := range []string{`no PJRT plugin named "nosuchplatform"`, AutoInstallEnv, "xla:/"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "auto-install") && !strings.Contains(err.Error(), AutoInstallEnv) {
		t.Errorf("GoMLX tried to auto-install: %v", err)
	}
}

// Adaptations says what posttrain does, or checked it need not do, between the client and a
// plugin: the API skew (none needed within major 0), go-xla's CUDA data directory kept out, and a
// CPU plugin's shared buffers.
func TestAdaptations(t *testing.T) {
	t.Setenv(CUDAChecksEnv, "")
	os.Unsetenv(CUDAChecksEnv)
	cuda := PluginInfo{Name: "/s/jax_plugins/xla_cuda13/xla_cuda_plugin.so", Path: "/s/jax_plugins/xla_cuda13/xla_cuda_plugin.so", Major: 0, Minor: 115, API: "0.115", TableSize: 1144}
	got := strings.Join(Adaptations("xla:"+cuda.Path, cuda), "\n")
	for _, want := range []string{"PJRT C API skew, client 0.83, plugin 0.115: none needed", "1144-byte function table", "GOPJRT_CUDA_CHECKS=0: go-xla v0.1.4's CUDA library check is off"} {
		if !strings.Contains(got, want) {
			t.Errorf("CUDA 0.115 plugin: adaptations %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "shared_buffers") {
		t.Errorf("CUDA plugin: adaptations %q name the CPU plugin's shared buffers", got)
	}
	cpu := PluginInfo{Name: "cpu", Path: "/r/bin/xla/pjrt_c_api_cpu_plugin.so", Major: 0, Minor: ClientAPIMinor, API: fmt.Sprintf("0.%d", ClientAPIMinor), TableSize: 900}
	got = strings.Join(Adaptations("xla:cpu", cpu), "\n")
	if !strings.Contains(got, "the client's: no skew") || !strings.Contains(got, "shared_buffers") {
		t.Errorf("CPU plugin of the client's version: adaptations %q", got)
	}
	t.Setenv(CUDAChecksEnv, "1")
	if got := strings.Join(Adaptations("xla:"+cuda.Path, cuda), "\n"); !strings.Contains(got, "GOPJRT_CUDA_CHECKS=1 set by the user") {
		t.Errorf("with the check on: adaptations %q", got)
	}
}

// The line a command prints names the plugin New found, without checking it again.
func TestDescribe_NamesTheBackendsPlugin(t *testing.T) {
	info, err := CheckPlugin(DefaultCPU)
	if err != nil || info.Path == "" {
		t.Skipf("no xla:cpu plugin here (make xla-cpu): %v", err)
	}
	b, err := New(DefaultCPU)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	want := "backend: xla:cpu (PJRT plugin " + info.Path + ", C API " + info.API + "; --backend)"
	if got := Describe("xla:cpu", b); got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}
