//go:build !noxla

package backend

import (
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/gomlx/go-xla/pkg/pjrt"
)

// PluginDirEnv names a directory searched for a PJRT plugin named in --backend (xla:<name> finds
// <dir>/pjrt_c_api_<name>_plugin.so), before the directories posttrain searches by default.
const PluginDirEnv = "POSTTRAIN_XLA_PLUGIN_DIR"

// InstallDir is where `make xla-cpu` installs the pinned CPU plugin, relative to the repository
// root: bin/xla/pjrt_c_api_cpu_plugin.so.
const InstallDir = "bin/xla"

// PluginDirs are the directories posttrain searches for a named plugin besides go-xla's own:
// $POSTTRAIN_XLA_PLUGIN_DIR, the xla folder beside the executable (bin/posttrain → bin/xla), and
// bin/xla of the posttrain checkout holding the working directory (so `go test` and `go run`
// find what `make xla-cpu` installed). Nothing is downloaded.
func PluginDirs() []string {
	var dirs []string
	if d := strings.TrimSpace(os.Getenv(PluginDirEnv)); d != "" {
		dirs = append(dirs, d)
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(exe), "xla"))
	}
	if root := moduleRoot(); root != "" {
		dirs = append(dirs, filepath.Join(root, InstallDir))
	}
	return dirs
}

// moduleRoot is the nearest directory at or above the working directory whose go.mod declares
// posttrain's module, or "".
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			s := bufio.NewScanner(f)
			ok := s.Scan() && strings.TrimSpace(s.Text()) == "module github.com/posttrain/posttrain"
			f.Close()
			if ok {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// findPlugin finds the plugin file for a name: $PJRT_PLUGIN_LIBRARY_PATH when set (go-xla's own
// override), then PluginDirs, then go-xla's default directories. It returns the path, or "" and
// the places searched.
func findPlugin(name string) (path string, searched []string) {
	_, override := os.LookupEnv(pjrt.PJRTPluginPathsEnv)
	if override {
		if p, ok := pjrt.AvailablePlugins()[name]; ok {
			return p, nil
		}
		searched = append(searched, "$"+pjrt.PJRTPluginPathsEnv+"="+os.Getenv(pjrt.PJRTPluginPathsEnv))
	}
	for _, d := range PluginDirs() {
		p := filepath.Join(d, PluginFile(name))
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			if abs, err := filepath.Abs(p); err == nil {
				p = abs
			}
			return p, nil
		}
		searched = append(searched, d)
	}
	if !override {
		if p, ok := pjrt.AvailablePlugins()[name]; ok {
			return p, nil
		}
		searched = append(searched, "~/.local/lib/go-xla", "/usr/local/lib/go-xla", "$LD_LIBRARY_PATH", "ld.so.conf")
	}
	return "", searched
}

// elfMachines maps GOARCH to the ELF machine its shared libraries are built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64, "ppc64le": elf.EM_PPC64, "s390x": elf.EM_S390, "riscv64": elf.EM_RISCV}

// checkELF reads a plugin file's ELF header before dlopen so that the common bad files get a
// plain reason: not an ELF file, a 32-bit or foreign-architecture library, or a truncated one
// (shorter than its own section or program header tables say). The error does not repeat the
// path. Other systems are not checked.
func checkELF(path string) error {
	if runtime.GOOS != "linux" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	var h [64]byte
	n, _ := f.ReadAt(h[:], 0)
	if n < 4 || !bytes.Equal(h[:4], []byte(elf.ELFMAG)) {
		return fmt.Errorf("not an ELF shared library (%d bytes)", st.Size())
	}
	if n < len(h) {
		return fmt.Errorf("truncated: %d bytes, shorter than an ELF header", st.Size())
	}
	if elf.Class(h[4]) != elf.ELFCLASS64 || elf.Data(h[5]) != elf.ELFDATA2LSB {
		return fmt.Errorf("a %v %v library; this binary (%s) loads 64-bit little-endian ones", elf.Class(h[4]), elf.Data(h[5]), runtime.GOARCH)
	}
	le := binary.LittleEndian
	machine := elf.Machine(le.Uint16(h[18:]))
	if want, ok := elfMachines[runtime.GOARCH]; ok && machine != want {
		return fmt.Errorf("built for %v, this binary for %v (%s)", machine, want, runtime.GOARCH)
	}
	phEnd := le.Uint64(h[32:]) + uint64(le.Uint16(h[54:]))*uint64(le.Uint16(h[56:]))
	shEnd := le.Uint64(h[40:]) + uint64(le.Uint16(h[58:]))*uint64(le.Uint16(h[60:]))
	if need := max(phEnd, shEnd); uint64(st.Size()) < need {
		return fmt.Errorf("truncated: %d bytes, its ELF header expects at least %d", st.Size(), need)
	}
	return nil
}
