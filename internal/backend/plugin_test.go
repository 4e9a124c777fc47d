//go:build !noxla

package backend

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gomlx/go-xla/pkg/pjrt"
)

// minAPITable is where PJRT_Executable_GetCompiledMemoryStats ends in go-xla's header.
func TestMinAPITableMatchesHeader(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/gomlx/go-xla").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "off.c")
	code := `#include <stdio.h>
#include <stddef.h>
#include "pjrt_c_api.h"
int main(void) { printf("%zu", offsetof(PJRT_Api, PJRT_Executable_GetCompiledMemoryStats) + sizeof(void*)); return 0; }
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	bin := filepath.Join(dir, "off")
	inc := filepath.Join(strings.TrimSpace(string(out)), "pkg", "pjrt")
	if out, err := exec.Command("gcc", "-I", inc, "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	got, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprint(minAPITable); string(got) != want {
		t.Fatalf("PJRT_Executable_GetCompiledMemoryStats ends at byte %s of PJRT_Api, minAPITable is %s", got, want)
	}
}

// withMachine copies an ELF file with its e_machine replaced (a library of another architecture).
func withMachine(t *testing.T, so string, m elf.Machine) string {
	t.Helper()
	b, err := os.ReadFile(so)
	if err != nil {
		t.Fatal(err)
	}
	binary.LittleEndian.PutUint16(b[18:], uint16(m))
	p := filepath.Join(t.TempDir(), "pjrt_c_api_foreign_plugin.so")
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// truncated copies the first half of a file.
func truncated(t *testing.T, so string) string {
	t.Helper()
	b, err := os.ReadFile(so)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pjrt_c_api_truncated_plugin.so")
	if err := os.WriteFile(p, b[:len(b)/2], 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// missingDependency builds a plugin linked against a library that is then removed, so that its
// ELF header is fine and dlopen fails.
func missingDependency(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	dep := compileSO(t, dir, "libptgone.so", "int pt_gone(void) { return 1; }\n")
	so := compileSO(t, dir, "pjrt_c_api_needy_plugin.so", "int pt_gone(void);\nint GetPjrtApi(void) { return pt_gone(); }\n", "-L", dir, "-lptgone")
	if err := os.Remove(dep); err != nil {
		t.Fatal(err)
	}
	return so
}

// Each bad plugin is refused before the client touches it, by New as by CheckPlugin, with one
// line naming the file and both API versions ("unknown" where it could not be read).
func TestBadPlugins_OneLineNamingFileAndVersions(t *testing.T) {
	good := fakePlugin(t, 0, 83)
	client := fmt.Sprintf("posttrain's client %d.%d", ClientAPIMajor, ClientAPIMinor)
	for _, c := range []struct {
		name, path, plugin, want string
	}{
		{"truncated", truncated(t, good), "unknown", "truncated: "},
		{"other architecture", withMachine(t, good, elf.EM_AARCH64), "unknown", "built for EM_AARCH64"},
		{"missing library", missingDependency(t), "unknown", "libptgone.so"},
		{"table too small", fakePluginTable(t, 0, 30, 400), "0.30", "function table of 400 bytes, too small for the client"},
		{"other major", fakePlugin(t, 1, 0), "1.0", "the major versions differ"},
	} {
		_, err := New("xla:" + c.path)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		msg := err.Error()
		for _, want := range []string{c.path, c.want, "plugin PJRT C API " + c.plugin, client} {
			if !strings.Contains(msg, want) {
				t.Errorf("%s: error %q does not contain %q", c.name, msg, want)
			}
		}
		if strings.Contains(msg, "\n") {
			t.Errorf("%s: error is not one line: %q", c.name, msg)
		}
	}
}

// No plugin of the name anywhere: the error lists the places searched and how to install one.
func TestNoPlugin_SaysWhereItSearched(t *testing.T) {
	if _, ok := pjrt.AvailablePlugins()["cpu"]; ok {
		t.Skip("a CPU plugin is installed in go-xla's directories; the search cannot come up empty")
	}
	empty := t.TempDir()
	t.Setenv(PluginDirEnv, empty)
	t.Chdir(t.TempDir()) // outside the checkout: its bin/xla is not searched
	_, err := New("xla:cpu")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`no PJRT plugin named "cpu"`, empty, "pjrt_c_api_cpu_plugin.so", "make xla-cpu", "plugin PJRT C API unknown"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// A named plugin is found in $POSTTRAIN_XLA_PLUGIN_DIR by its go-xla file name.
func TestNamedPluginFoundInPluginDir(t *testing.T) {
	so := fakePlugin(t, 0, 90)
	t.Setenv(PluginDirEnv, filepath.Dir(so))
	info, err := CheckPlugin("xla:fake")
	if err != nil {
		t.Fatal(err)
	}
	if info.Path != so || info.API != "0.90" {
		t.Fatalf("CheckPlugin(xla:fake) = %+v, want %s at API 0.90", info, so)
	}
}

// installedCPU is the CPU plugin `make xla-cpu` installed, or the test is skipped saying so.
func installedCPU(t *testing.T) PluginInfo {
	t.Helper()
	info, err := CheckPlugin("xla:cpu")
	if err != nil {
		t.Skipf("no XLA CPU plugin installed (run `make xla-cpu`): %v", err)
	}
	return info
}

// With the pinned plugin installed: found by name, its version read, a client of N devices made.
func TestInstalledCPUPlugin_Devices(t *testing.T) {
	info := installedCPU(t)
	if !regexp.MustCompile(`^0\.\d+$`).MatchString(info.API) || info.TableSize < minAPITable {
		t.Fatalf("installed plugin: %+v", info)
	}
	for _, n := range []int{1, 3} {
		b, err := NewWithOptions("xla:cpu", Options{CPUDevices: n})
		if err != nil {
			t.Fatal(err)
		}
		if got := b.NumDevices(); got != n {
			t.Errorf("cpu_device_count %d: %d devices", n, got)
		}
		if attrs := PluginAttributes(info.Path); attrs["stablehlo_current_version"] == nil {
			t.Errorf("no stablehlo_current_version among the plugin's attributes %v", attrs)
		}
		b.Finalize()
	}
}

// A plugin whose name says CUDA with an nvidia/ directory at ../nvidia (the layout go-xla v0.1.4
// looks for) gets posttrain's CUDA data directory in XLA_FLAGS, the one FindCUDA found beside it,
// never go-xla's, which would set --xla_gpu_cuda_data_dir to a directory of its author's machine
// (the installed CPU plugin stands in for the CUDA one: the check only reads the file's name and
// its neighbours). The GPU client's options reach PJRT_Client_Create: the CPU client refuses them
// by name, which a CUDA plugin takes (JAX passes the same).
func TestCUDAPluginLeavesXLAFlags(t *testing.T) {
	info := installedCPU(t)
	tree := t.TempDir()
	dir := filepath.Join(tree, "jax_plugins", "xla_cuda13")
	libdevice := filepath.Join(tree, "nvidia", "cu13", "nvvm", "libdevice")
	for _, d := range []string{dir, filepath.Join(tree, "jax_plugins", "nvidia"), libdevice} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	so := filepath.Join(dir, "xla_cuda_plugin.so")
	if err := os.Symlink(info.Path, so); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(libdevice, "libdevice.10.bc"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XLA_FLAGS", "")
	t.Setenv("NVIDIA_TF32_OVERRIDE", "")
	os.Unsetenv(CUDAChecksEnv)
	t.Cleanup(func() { os.Unsetenv(CUDAChecksEnv) })
	_, err := New("xla:" + so)
	if err == nil || !strings.Contains(err.Error(), "Unexpected option name passed to PJRT_Client_Create") {
		t.Fatalf("the CPU client given the GPU client's options: err = %v", err)
	}
	want := "--xla_gpu_cuda_data_dir=" + filepath.Join(tree, "nvidia", "cu13") + " --xla_gpu_enable_triton_gemm=false"
	if flags := os.Getenv("XLA_FLAGS"); flags != want {
		t.Errorf("XLA_FLAGS = %q after loading %s, want %q", flags, so, want)
	}
	if v := os.Getenv("NVIDIA_TF32_OVERRIDE"); v != "0" {
		t.Errorf("NVIDIA_TF32_OVERRIDE = %q, want 0 (tf32 off)", v)
	}
}
