//go:build !noxla

package backend

/*
#cgo linux LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>

// The head of PJRT_Api as every PJRT C API version lays it out (pjrt_c_api.h): the struct size,
// the extension chain, then PJRT_Api_Version. Only these fields are read, before any call into the
// plugin, so that a plugin of another version can be named rather than crash the client.
typedef struct { size_t struct_size; void* extension_start; int major_version; int minor_version; } pt_api_version;
typedef struct { size_t struct_size; void* extension_start; pt_api_version version; } pt_api_head;
typedef const pt_api_head* (*pt_get_api_fn)(void);

// pt_plugin_version loads path (kept loaded: the client will dlopen the same file) and reads its
// PJRT C API version and the size of its PJRT_Api table. Returns 0 on success, else 1 (dlopen),
// 2 (no GetPjrtApi), 3 (null API); err receives dlerror's text.
static int pt_plugin_version(const char* path, int* major, int* minor, size_t* size, char* err, size_t n) {
	dlerror();
	void* h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	if (h == NULL) {
		const char* e = dlerror();
		if (e != NULL) { snprintf(err, n, "%s", e); }
		return 1;
	}
	pt_get_api_fn fn = (pt_get_api_fn)dlsym(h, "GetPjrtApi");
	if (fn == NULL) {
		const char* e = dlerror();
		if (e != NULL) { snprintf(err, n, "%s", e); }
		dlclose(h);
		return 2;
	}
	const pt_api_head* api = fn();
	if (api == NULL) { return 3; }
	*size = api->struct_size;
	*major = api->version.major_version;
	*minor = api->version.minor_version;
	return 0;
}
*/
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/xla" // registers "xla" (cgo; the PJRT plugin is dlopen-ed at run time)
)

const xlaCompiled = true

// The PJRT C API version this binary's client speaks: PJRT_API_MAJOR/MINOR of go-xla v0.1.4's
// pjrt_c_api.h (checked against the header by TestClientAPIMatchesHeader).
const (
	ClientAPIMajor = 0
	ClientAPIMinor = 83
)

// ClientAPI is ClientAPIMajor.ClientAPIMinor with the library that speaks it.
var ClientAPI = fmt.Sprintf("%d.%d (go-xla v0.1.4)", ClientAPIMajor, ClientAPIMinor)

func init() {
	// GoMLX installs plugins from the network on every xla.New unless told not to; posttrain never
	// does so implicitly (an offline GPU box fails on the download; an online one gets "latest").
	xla.EnableAutoInstall(AutoInstallAllowed())
}

// AutoInstallAllowed says whether $POSTTRAIN_XLA_AUTO_INSTALL lets GoMLX download PJRT plugins.
func AutoInstallAllowed() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(AutoInstallEnv))) {
	case "1", "true", "yes":
		return true
	}
	return false
}

// minAPITable is the smallest PJRT_Api table (its struct_size) the client can use: the table must
// reach the last function go-xla v0.1.4 calls, PJRT_Executable_GetCompiledMemoryStats (entry 97 of
// the 0.83 header; TestMinAPITableMatchesHeader checks the offset). A smaller table would have the
// client call past its end.
const minAPITable = 816

// PluginInfo is what CheckPlugin learned about the PJRT plugin of an XLA configuration.
type PluginInfo struct {
	Name         string // the configuration's plugin name or path ("cpu", "/…/xla_cuda_plugin.so")
	Path         string // the file found ("" when GoMLX is left to choose or install one)
	Major, Minor int    // its PJRT C API version (PJRT_Api.pjrt_api_version)
	API          string // "major.minor"
	TableSize    int    // PJRT_Api.struct_size: the size of its function table in bytes
}

// pluginName is the plugin part of "xla:<plugin>[,options]".
func pluginName(config string) string {
	_, rest, _ := strings.Cut(config, ":")
	name, _, _ := strings.Cut(rest, ",")
	return strings.TrimSpace(name)
}

// CheckPlugin finds the PJRT plugin an XLA configuration names (an absolute path, or a name
// searched as findPlugin does: $PJRT_PLUGIN_LIBRARY_PATH, PluginDirs, go-xla's directories),
// checks its ELF header, loads it and reads its PJRT C API version and table size without
// initializing it. Every failure is one line naming the file (or what was searched) and both API
// versions: a missing, truncated, foreign or non-PJRT file, a table too small for the client, a
// major version other than the client's. With no plugin named (config "xla"), or a name not found
// while auto-install is allowed, it returns an empty Path and leaves the choice to GoMLX.
func CheckPlugin(config string) (PluginInfo, error) {
	info := PluginInfo{Name: pluginName(config)}
	fail := func(format string, args ...any) (PluginInfo, error) {
		api := info.API
		if api == "" {
			api = "unknown"
		}
		return info, fmt.Errorf("backend %q: %s [plugin PJRT C API %s, posttrain's client %s]", config, fmt.Sprintf(format, args...), api, ClientAPI)
	}
	switch {
	case info.Name == "":
		return info, nil
	case filepath.IsAbs(info.Name):
		info.Path = info.Name
	case info.Name == "cuda":
		// go-xla's name in posttrain's directories, else JAX's plugin where pip put it.
		p, _ := findPlugin(info.Name)
		if p == "" {
			c, err := HostProbe().FindCUDA("")
			if err != nil {
				return info, notFound{fmt.Errorf("backend %q: %w", config, err)}
			}
			p = c.Plugin
		}
		info.Path = p
	default:
		p, searched := findPlugin(info.Name)
		if p == "" && AutoInstallAllowed() {
			return info, nil
		}
		if p == "" {
			hint := ""
			if info.Name == "cpu" {
				hint = "; install the pinned CPU plugin with `make xla-cpu`"
			}
			_, err := fail("no PJRT plugin named %q found: searched %s for %s (CUDA plugins only where a GPU is visible)%s; or name the file, e.g. --backend xla:/…/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so, or set %s=1 to let GoMLX download one",
				info.Name, strings.Join(searched, ", "), PluginFile(info.Name), hint, AutoInstallEnv)
			return info, notFound{err}
		}
		info.Path = p
	}
	if st, err := os.Stat(info.Path); err != nil {
		return fail("PJRT plugin: %v", err)
	} else if st.IsDir() {
		return fail("PJRT plugin %s is a directory; name the .so file", info.Path)
	}
	if err := checkELF(info.Path); err != nil {
		return fail("cannot load PJRT plugin %s: %v", info.Path, err)
	}
	cpath := C.CString(info.Path)
	defer C.free(unsafe.Pointer(cpath))
	var major, minor C.int
	var size C.size_t
	var msg [512]C.char
	switch C.pt_plugin_version(cpath, &major, &minor, &size, &msg[0], C.size_t(len(msg))) {
	case 0:
	case 1:
		return fail("cannot load PJRT plugin %s: %s (check its libraries with `ldd %s`)", info.Path, C.GoString(&msg[0]), info.Path)
	case 2:
		return fail("%s is not a PJRT plugin: it exports no GetPjrtApi (%s)", info.Path, C.GoString(&msg[0]))
	default:
		return fail("PJRT plugin %s returned no API table from GetPjrtApi", info.Path)
	}
	info.Major, info.Minor, info.TableSize = int(major), int(minor), int(size)
	info.API = fmt.Sprintf("%d.%d", info.Major, info.Minor)
	if info.Major != ClientAPIMajor {
		return fail("PJRT plugin %s speaks PJRT C API %s, posttrain's client speaks %d.%d: the major versions differ, so they cannot work together; use a plugin of API %d.x", info.Path, info.API, ClientAPIMajor, ClientAPIMinor, ClientAPIMajor)
	}
	if info.TableSize < minAPITable {
		return fail("PJRT plugin %s has a function table of %d bytes, too small for the client, which calls entries up to byte %d (PJRT_Executable_GetCompiledMemoryStats)", info.Path, info.TableSize, minAPITable)
	}
	return info, nil
}

// notFound is CheckPlugin's error for a plugin name found nowhere: errors.Is(err, ErrNoPlugin).
type notFound struct{ error }

func (e notFound) Unwrap() []error { return []error{e.error, ErrNoPlugin} }

// CUDAChecksEnv is go-xla's switch of its CUDA library check, which posttrain turns off.
const CUDAChecksEnv = "GOPJRT_CUDA_CHECKS"

// keepCUDADataDir turns off go-xla v0.1.4's CUDA library check before a plugin is loaded, unless
// the user set it: when an nvidia/ directory sits at ../nvidia from a plugin whose name says CUDA,
// that check sets XLA_FLAGS=--xla_gpu_cuda_data_dir to a directory of its author's machine
// (pkg/pjrt/cuda_linux.go:98, "/home/janpf/.local/lib/go-xla/nvidia"; fixed upstream in v0.2.1),
// which would send XLA looking for ptxas and libdevice where they are not. XLA_FLAGS stays the
// user's.
func keepCUDADataDir() {
	if _, set := os.LookupEnv(CUDAChecksEnv); !set {
		os.Setenv(CUDAChecksEnv, "0")
	}
}

// Adaptations lists, one line each, what posttrain does between go-xla v0.1.4's client and the
// plugin info describes (as CheckPlugin found it for config), and what it checked need not be done:
// the C API skew (a newer or older plugin accepts the client's structs by their struct_size, the
// PJRT rule; the function table reaches every entry the client calls), go-xla's CUDA library
// check turned off so its hard-coded CUDA data directory cannot take effect, and the shared host
// buffers of a CPU plugin. `posttrain bench backend` reports them, the first stage of
// scripts/gpu-check.sh.
func Adaptations(config string, info PluginInfo) []string {
	var out []string
	if info.API != "" {
		switch {
		case info.Minor == ClientAPIMinor:
			out = append(out, fmt.Sprintf("PJRT C API %s, the client's: no skew", info.API))
		default:
			out = append(out, fmt.Sprintf("PJRT C API skew, client %d.%d, plugin %s: none needed, every argument struct carries its struct_size and the plugin takes the client's (PJRT's struct-size rule); its %d-byte function table reaches the last entry the client calls (byte %d)",
				ClientAPIMajor, ClientAPIMinor, info.API, info.TableSize, minAPITable))
		}
	}
	switch v, set := os.LookupEnv(CUDAChecksEnv); {
	case !set || v == "0":
		out = append(out, CUDAChecksEnv+"=0: go-xla v0.1.4's CUDA library check is off, so its hard-coded --xla_gpu_cuda_data_dir (pkg/pjrt/cuda_linux.go:98) cannot take effect; XLA_FLAGS stays the user's")
	default:
		out = append(out, fmt.Sprintf("%s=%s set by the user: go-xla v0.1.4's CUDA library check runs, and with an nvidia/ directory beside a CUDA plugin it sets --xla_gpu_cuda_data_dir to its author's path (pkg/pjrt/cuda_linux.go:98)", CUDAChecksEnv, v))
	}
	_, rest, _ := strings.Cut(config, ":")
	name, opts, _ := strings.Cut(rest, ",")
	if info.Path != "" && strings.TrimSpace(name) == "cpu" && !strings.Contains(opts, "shared_buffers") {
		out = append(out, "shared_buffers: host tensors shared with the CPU plugin's buffers (GoMLX's option for a plugin named cpu, kept when the plugin is given by path)")
	}
	return out
}

// newXLA creates the XLA backend of config with the plugin CheckPlugin found (GoMLX is given its
// absolute path, so it neither searches nor installs; a plugin named "cpu" keeps GoMLX's shared
// host buffers) and opt's client options.
func newXLA(config string, info PluginInfo, opt Options) (backends.Backend, error) {
	_, rest, _ := strings.Cut(config, ":")
	name, opts, _ := strings.Cut(rest, ",")
	if info.Path != "" {
		if strings.TrimSpace(name) == "cpu" && !strings.Contains(opts, "shared_buffers") {
			opts = strings.TrimPrefix(opts+",shared_buffers", ",")
		}
		name = info.Path
	}
	cfg := name
	if opts != "" {
		cfg += "," + opts
	}
	// One client per configuration and options in a process, as JAX keeps one per platform: its
	// executable cache then serves every command and test of the process (a resumed run compiles
	// nothing its first run compiled), and device memory is not split between clients.
	key := fmt.Sprintf("%s|%d|%+v", cfg, opt.CPUDevices, opt.GPU)
	xlaClients.Lock()
	defer xlaClients.Unlock()
	if c := xlaClients.m[key]; c != nil {
		return c, nil
	}
	keepCUDADataDir()
	var options pjrt.NamedValuesMap
	if opt.CPUDevices > 0 {
		options = pjrt.NamedValuesMap{"cpu_device_count": int64(opt.CPUDevices)}
	}
	if IsCUDA(config) || IsCUDA("xla:"+info.Path) {
		c, err := HostProbe().FindCUDA(info.Path)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", config, err)
		}
		opts, err := opt.GPU.ClientOptions(os.Getenv)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", config, err)
		}
		options = pjrt.NamedValuesMap(opts)
		for _, kv := range opt.GPU.Environment(c, os.Getenv) {
			k, v, _ := strings.Cut(kv, "=")
			os.Setenv(k, v)
		}
	}
	b, err := create(config, func(string) (backends.Backend, error) {
		b, err := xla.NewWithOptions(cfg, options)
		if err != nil {
			return nil, err
		}
		return b, nil
	})
	if err != nil && info.Path != "" {
		return nil, fmt.Errorf("%w [plugin %s: PJRT C API %s, posttrain's client %s]", err, info.Path, info.API, ClientAPI)
	}
	if c, ok := b.(*counting); ok {
		c.plugin = info
		c.shared = true
		xlaClients.m[key] = c
	}
	return b, err
}

// xlaClients are the process's XLA backends, by plugin configuration and options (newXLA).
var xlaClients = struct {
	sync.Mutex
	m map[string]*counting
}{m: map[string]*counting{}}

// CompileCacheHits is how many graph compilations b's executable cache answered without running
// XLA's compiler (an XLA backend; 0 for others).
func CompileCacheHits(b backends.Backend) int {
	if x, ok := Unwrap(b).(*xla.Backend); ok {
		return x.CompileCacheHits()
	}
	return 0
}

// PluginAttributes returns the attributes of the loaded plugin at path (xla_version,
// stablehlo_current_version, stablehlo_minimum_version), or nil. Call it after New created the
// backend.
func PluginAttributes(path string) map[string]any {
	if path == "" {
		return nil
	}
	p, err := pjrt.GetPlugin(path)
	if err != nil {
		return nil
	}
	return p.Attributes()
}
