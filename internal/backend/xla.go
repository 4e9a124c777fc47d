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
// PJRT C API version. Returns 0 on success, else 1 (dlopen), 2 (no GetPjrtApi), 3 (null API);
// err receives dlerror's text.
static int pt_plugin_version(const char* path, int* major, int* minor, char* err, size_t n) {
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
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
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

// PluginInfo is what CheckPlugin learned about the PJRT plugin of an XLA configuration.
type PluginInfo struct {
	Name         string // the configuration's plugin name or path ("cuda", "/…/xla_cuda_plugin.so")
	Path         string // the file found ("" when GoMLX is left to choose or install one)
	Major, Minor int    // its PJRT C API version (PJRT_Api.pjrt_api_version)
	API          string // "major.minor"
}

// pluginName is the plugin part of "xla:<plugin>[,options]".
func pluginName(config string) string {
	_, rest, _ := strings.Cut(config, ":")
	name, _, _ := strings.Cut(rest, ",")
	return strings.TrimSpace(name)
}

// CheckPlugin finds the PJRT plugin an XLA configuration names (an absolute path, or a name
// searched where go-xla searches: $PJRT_PLUGIN_LIBRARY_PATH, else ~/.local/lib/go-xla,
// /usr/local/lib/go-xla, $LD_LIBRARY_PATH, ld.so.conf), loads it and reads its PJRT C API
// version without initializing it. A plugin of another major version than the client's is an
// error naming both; so is a file that cannot be loaded or is no PJRT plugin. With no plugin named
// (config "xla"), or a name not found while auto-install is allowed, it returns an empty Path and
// leaves the choice to GoMLX.
func CheckPlugin(config string) (PluginInfo, error) {
	info := PluginInfo{Name: pluginName(config)}
	switch {
	case info.Name == "":
		return info, nil
	case filepath.IsAbs(info.Name):
		info.Path = info.Name
	default:
		if p, ok := pjrt.AvailablePlugins()[info.Name]; ok {
			info.Path = p
		} else if AutoInstallAllowed() {
			return info, nil
		} else {
			return info, fmt.Errorf("backend %q: no PJRT plugin named %q found (searched $%s, else ~/.local/lib/go-xla, /usr/local/lib/go-xla, $LD_LIBRARY_PATH and ld.so.conf for pjrt_c_api_%s_plugin.so and the like; CUDA plugins only where a GPU is visible). Name the plugin file instead, e.g. --backend xla:/…/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so, or set %s=1 to let GoMLX download one",
				config, info.Name, pjrt.PJRTPluginPathsEnv, info.Name, AutoInstallEnv)
		}
	}
	if st, err := os.Stat(info.Path); err != nil {
		return info, fmt.Errorf("backend %q: PJRT plugin: %w", config, err)
	} else if st.IsDir() {
		return info, fmt.Errorf("backend %q: PJRT plugin %s is a directory; name the .so file", config, info.Path)
	}
	cpath := C.CString(info.Path)
	defer C.free(unsafe.Pointer(cpath))
	var major, minor C.int
	var msg [512]C.char
	switch C.pt_plugin_version(cpath, &major, &minor, &msg[0], C.size_t(len(msg))) {
	case 0:
	case 1:
		return info, fmt.Errorf("backend %q: cannot load PJRT plugin %s: %s (check its libraries with `ldd %s`)", config, info.Path, C.GoString(&msg[0]), info.Path)
	case 2:
		return info, fmt.Errorf("backend %q: %s is not a PJRT plugin: it exports no GetPjrtApi (%s)", config, info.Path, C.GoString(&msg[0]))
	default:
		return info, fmt.Errorf("backend %q: PJRT plugin %s returned no API table from GetPjrtApi", config, info.Path)
	}
	info.Major, info.Minor = int(major), int(minor)
	info.API = fmt.Sprintf("%d.%d", info.Major, info.Minor)
	if err := compatible(info); err != nil {
		return info, fmt.Errorf("backend %q: %w", config, err)
	}
	return info, nil
}

// compatible applies PJRT's versioning rule (pjrt_c_api.h): a major version change breaks the ABI;
// minor versions add fields that each side detects through struct_size, so a newer plugin serves
// an older client as long as it still accepts the older structs (an error at client creation, with
// both versions named by New, if it does not).
func compatible(info PluginInfo) error {
	if info.Major != ClientAPIMajor {
		return fmt.Errorf("PJRT plugin %s speaks PJRT C API %s, posttrain's client speaks %s: the major versions differ, so they cannot work together; use a plugin of API %d.x", info.Path, info.API, ClientAPI, ClientAPIMajor)
	}
	return nil
}

// PluginAttributes returns the attributes of the loaded plugin named by an XLA configuration
// (e.g. xla_version, stablehlo_current_version), or nil. Call it after New created the backend.
func PluginAttributes(config string) map[string]any {
	name := pluginName(config)
	if name == "" {
		return nil
	}
	p, err := pjrt.GetPlugin(name)
	if err != nil {
		return nil
	}
	return p.Attributes()
}
