package backend

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// CUDA is what XLA's GPU backend needs on a machine, as FindCUDA found it: JAX's CUDA PJRT plugin,
// the CUDA data directory whose nvvm/libdevice/libdevice*.bc XLA links into every kernel that
// calls exp, log or tanh (XLA's --xla_gpu_cuda_data_dir), and ptxas, which XLA runs to turn its
// PTX into machine code (without it XLA falls back to the driver's slower JIT, or fails).
type CUDA struct {
	Plugin  string // absolute path of the PJRT plugin (jax_plugins/xla_cuda13/xla_cuda_plugin.so, ...)
	DataDir string // the directory holding nvvm/libdevice
	Ptxas   string // the ptxas executable
}

// Probe is how FindCUDA and the default backend see the machine: the environment, the file
// system and the python3 on PATH. HostProbe is the real one; tests give their own.
type Probe struct {
	LookupEnv func(string) (string, bool)
	Stat      func(string) (fs.FileInfo, error)
	Glob      func(string) ([]string, error)
	LookPath  func(string) (string, error)
	// SitePackages lists the python3 on PATH's site-packages directories (sys.path), where pip
	// installs jax-cuda13-pjrt (jax_plugins/) and the nvidia-* wheels (nvidia/).
	SitePackages func() []string
	Home         string
}

// HostProbe is the Probe of this machine.
func HostProbe() Probe {
	home, _ := os.UserHomeDir()
	return Probe{LookupEnv: os.LookupEnv, Stat: os.Stat, Glob: filepath.Glob, LookPath: exec.LookPath,
		SitePackages: pythonSitePackages, Home: home}
}

// pythonSitePackages asks the python3 on PATH for its sys.path (a few seconds at most; none when
// there is no python3), once per process.
var pythonSitePackages = sync.OnceValue(func() []string {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil
	}
	cmd := exec.Command(py, "-c", "import sys; print('\\n'.join(p for p in sys.path if p))")
	cmd.Env = append(os.Environ(), "PYTHONNOUSERSITE=")
	done := make(chan struct{})
	var out []byte
	go func() { out, _ = cmd.Output(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		if cmd.Process != nil {
			cmd.Process.Kill()
		}
		<-done
	}
	return strings.Fields(string(out))
})

// NVIDIADevices reports whether the machine has an NVIDIA GPU its driver exposes: a /dev/nvidia0
// (…N) device node, or a GPU under /proc/driver/nvidia/gpus. CUDA_VISIBLE_DEVICES set to an empty
// value or -1 hides them, as it does from CUDA.
func (p Probe) NVIDIADevices() bool {
	if v, set := p.LookupEnv("CUDA_VISIBLE_DEVICES"); set && (strings.TrimSpace(v) == "" || strings.TrimSpace(v) == "-1") {
		return false
	}
	if m, _ := p.Glob("/dev/nvidia[0-9]*"); len(m) > 0 {
		return true
	}
	m, _ := p.Glob("/proc/driver/nvidia/gpus/*")
	return len(m) > 0
}

func (p Probe) getenv(key string) string {
	v, _ := p.LookupEnv(key)
	return v
}

func (p Probe) isFile(path string) bool {
	st, err := p.Stat(path)
	return err == nil && !st.IsDir()
}

// FindCUDA finds JAX's CUDA plugin, the CUDA data directory and ptxas, in this order:
//
//   - the plugin: each directory (or file) of $PJRT_PLUGIN_LIBRARY_PATH (go-xla's search path:
//     xla_cuda_plugin.so or pjrt_c_api_cuda_plugin.so in it), then the python3 on PATH's
//     site-packages jax_plugins/xla_cuda13, then jax_plugins/xla_cuda12 (pip install
//     "jax[cuda13]"), then go-xla's directories ~/.local/lib/go-xla and /usr/local/lib/go-xla;
//   - the data directory: $XLA_FLAGS' --xla_gpu_cuda_data_dir when set, else the nvidia-* wheels
//     beside the plugin or in site-packages (nvidia/cu13, the CUDA 13 wheels' layout;
//     nvidia/cuda_nvcc, CUDA 12's; any other nvidia/*), $CUDA_HOME, $CUDA_PATH, /usr/local/cuda,
//     /usr/local/cuda-*: the first holding nvvm/libdevice/libdevice*.bc;
//   - ptxas: in the nvidia wheels' bin/, the data directory's bin/, then PATH.
//
// A missing plugin or data directory is an error of one line naming what was searched and what
// to install; a missing ptxas is not (XLA can hand PTX to the driver), CUDA.Ptxas is then "".
//
// plugin, when not "", is the plugin to use (a --backend path): only the data directory and
// ptxas are searched.
func (p Probe) FindCUDA(plugin string) (CUDA, error) {
	c := CUDA{Plugin: plugin}
	var searched []string
	var sites []string
	for _, d := range p.SitePackages() {
		if !slices.Contains(sites, d) {
			sites = append(sites, d)
		}
	}
	if env := p.getenv("PJRT_PLUGIN_LIBRARY_PATH"); env != "" && c.Plugin == "" {
		for _, d := range strings.Split(env, ":") {
			if d == "" {
				continue
			}
			if strings.HasSuffix(d, ".so") && p.isFile(d) && strings.Contains(filepath.Base(d), "cuda") {
				c.Plugin = d
				break
			}
			for _, name := range []string{"xla_cuda_plugin.so", PluginFile("cuda")} {
				if f := filepath.Join(d, name); c.Plugin == "" && p.isFile(f) {
					c.Plugin = f
				}
			}
			if c.Plugin != "" {
				break
			}
		}
		if c.Plugin == "" {
			searched = append(searched, "$PJRT_PLUGIN_LIBRARY_PATH="+env)
		}
	}
	if c.Plugin == "" {
		for _, cuda := range []string{"xla_cuda13", "xla_cuda12"} {
			for _, s := range sites {
				if f := filepath.Join(s, "jax_plugins", cuda, "xla_cuda_plugin.so"); p.isFile(f) {
					c.Plugin = f
					break
				}
			}
			if c.Plugin != "" {
				break
			}
		}
		if c.Plugin == "" {
			if len(sites) == 0 {
				searched = append(searched, "python3's site-packages (no python3 on PATH)")
			} else {
				searched = append(searched, "jax_plugins/xla_cuda13 and xla_cuda12 in "+strings.Join(sites, ", "))
			}
		}
	}
	if c.Plugin == "" {
		var dirs []string
		if p.Home != "" {
			dirs = append(dirs, filepath.Join(p.Home, ".local/lib/go-xla"))
		}
		dirs = append(dirs, "/usr/local/lib/go-xla")
		for _, d := range dirs {
			if f := filepath.Join(d, PluginFile("cuda")); p.isFile(f) {
				c.Plugin = f
				break
			}
		}
		if c.Plugin == "" {
			searched = append(searched, strings.Join(dirs, ", "))
		}
	}
	if c.Plugin == "" {
		return c, fmt.Errorf("no CUDA PJRT plugin found (searched %s): install JAX's, e.g. `pip install \"jax[cuda13]==0.11.2\"` for the python3 on PATH, or name one with --backend xla:/path/to/xla_cuda_plugin.so (--backend xla:cpu or go runs on the CPU)", strings.Join(searched, "; "))
	}
	c.Plugin = absPath(c.Plugin)

	// The nvidia-* wheels: those in the plugin's own site-packages first (pip installs them together).
	var wheelDirs []string
	if i := strings.LastIndex(c.Plugin, string(filepath.Separator)+"jax_plugins"+string(filepath.Separator)); i > 0 {
		sites = append([]string{c.Plugin[:i]}, sites...)
	}
	for _, s := range sites {
		for _, sub := range []string{"cu13", "cuda_nvcc", "cuda_nvrtc"} {
			if d := filepath.Join(s, "nvidia", sub); !slices.Contains(wheelDirs, d) {
				wheelDirs = append(wheelDirs, d)
			}
		}
		more, _ := p.Glob(filepath.Join(s, "nvidia", "*"))
		for _, d := range more {
			if !slices.Contains(wheelDirs, d) {
				wheelDirs = append(wheelDirs, d)
			}
		}
	}
	hasLibdevice := func(d string) bool {
		m, _ := p.Glob(filepath.Join(d, "nvvm", "libdevice", "libdevice*.bc"))
		return d != "" && len(m) > 0
	}
	if d := xlaFlagValue(p.getenv("XLA_FLAGS"), "xla_gpu_cuda_data_dir"); d != "" {
		if !hasLibdevice(d) {
			return c, fmt.Errorf("XLA_FLAGS names --xla_gpu_cuda_data_dir=%s, which has no nvvm/libdevice/libdevice*.bc", d)
		}
		c.DataDir = d
	}
	candidates := append([]string{}, wheelDirs...)
	for _, e := range []string{"CUDA_HOME", "CUDA_PATH"} {
		if v := p.getenv(e); v != "" {
			candidates = append(candidates, v)
		}
	}
	candidates = append(candidates, "/usr/local/cuda")
	if m, _ := p.Glob("/usr/local/cuda-*"); len(m) > 0 {
		slices.Sort(m)
		slices.Reverse(m)
		candidates = append(candidates, m...)
	}
	for _, d := range candidates {
		if c.DataDir != "" {
			break
		}
		if hasLibdevice(d) {
			c.DataDir = d
		}
	}
	if c.DataDir == "" {
		return c, fmt.Errorf("the CUDA plugin %s was found but no CUDA data directory with nvvm/libdevice/libdevice*.bc (searched the nvidia/* wheels of %s, $CUDA_HOME, $CUDA_PATH, /usr/local/cuda*): XLA needs it to compile; install it with `pip install \"jax[cuda13]==0.11.2\"` (its nvidia-nvvm wheel) or set CUDA_HOME", c.Plugin, strings.Join(sites, ", "))
	}
	for _, d := range append(wheelDirs, c.DataDir) {
		if f := filepath.Join(d, "bin", "ptxas"); p.isFile(f) {
			c.Ptxas = f
			break
		}
	}
	if c.Ptxas == "" {
		if f, err := p.LookPath("ptxas"); err == nil {
			c.Ptxas = f
		}
	}
	return c, nil
}

// absPath is path made absolute where it can be.
func absPath(path string) string {
	if a, err := filepath.Abs(path); err == nil {
		return a
	}
	return path
}

// xlaFlagValue is the value of --name=VALUE (or --name VALUE) in an XLA_FLAGS string, or "".
func xlaFlagValue(flags, name string) string {
	fields := strings.Fields(flags)
	for i, f := range fields {
		f = strings.TrimLeft(f, "-")
		if v, ok := strings.CutPrefix(f, name+"="); ok {
			return v
		}
		if f == name && i+1 < len(fields) {
			return fields[i+1]
		}
	}
	return ""
}

// GPUOptions are the client options of a CUDA plugin (XLA's GPU client), with JAX's environment
// variables as their defaults where the option is unset (ClientOptions).
type GPUOptions struct {
	// MemoryFraction is the share of the GPU's memory XLA's allocator reserves (its
	// memory_fraction option); 0 = $XLA_CLIENT_MEM_FRACTION or $XLA_PYTHON_CLIENT_MEM_FRACTION
	// (JAX's), else DefaultGPUMemoryFraction.
	MemoryFraction float64
	// Deterministic asks XLA for deterministic kernels (--xla_gpu_deterministic_ops: scatters and
	// reductions without float atomics, autotuning off), HF's full_determinism.
	Deterministic bool
	// TF32 lets float32 matrix products run on tensor cores in TF32 (10-bit mantissa), HF's tf32;
	// off (the default, as PyTorch's torch.backends.cuda.matmul.allow_tf32) sets
	// NVIDIA_TF32_OVERRIDE=0 for the CUDA libraries and keeps XLA's own float32 dots in float32.
	TF32 bool
}

// DefaultGPUMemoryFraction is the memory_fraction posttrain gives XLA's GPU client when neither an
// option nor JAX's environment sets one: XLA's own default (0.75) leaves a quarter of the card
// unused by a single training process.
const DefaultGPUMemoryFraction = 0.90

// ClientOptions returns the PJRT client options of a CUDA plugin for o, reading JAX's variables
// through getenv as jaxlib 0.11.2's generate_pjrt_gpu_plugin_options does: memory_fraction
// ($XLA_CLIENT_MEM_FRACTION, or the older $XLA_PYTHON_CLIENT_MEM_FRACTION; both set is an error),
// preallocate ($XLA_PYTHON_CLIENT_PREALLOCATE: false, False or 0 turn it off) and allocator
// ($XLA_PYTHON_CLIENT_ALLOCATOR: default, platform, bfc, cuda_async, vmm or address).
func (o GPUOptions) ClientOptions(getenv func(string) string) (map[string]any, error) {
	opts := map[string]any{}
	allocator := strings.ToLower(strings.TrimSpace(getenv("XLA_PYTHON_CLIENT_ALLOCATOR")))
	if allocator == "" {
		allocator = "default"
	}
	if !slices.Contains([]string{"default", "platform", "bfc", "cuda_async", "vmm", "address"}, allocator) {
		return nil, fmt.Errorf("XLA_PYTHON_CLIENT_ALLOCATOR=%q: want default, platform, bfc, cuda_async, vmm or address", allocator)
	}
	opts["allocator"] = allocator
	frac := o.MemoryFraction
	if frac == 0 {
		mf, old := getenv("XLA_CLIENT_MEM_FRACTION"), getenv("XLA_PYTHON_CLIENT_MEM_FRACTION")
		if mf != "" && old != "" {
			return nil, fmt.Errorf("XLA_CLIENT_MEM_FRACTION and XLA_PYTHON_CLIENT_MEM_FRACTION are both set: keep one (the second is JAX's older name)")
		}
		name := "XLA_CLIENT_MEM_FRACTION"
		if mf == "" {
			mf, name = old, "XLA_PYTHON_CLIENT_MEM_FRACTION"
		}
		if mf != "" {
			v, err := strconv.ParseFloat(strings.TrimSpace(mf), 64)
			if err != nil {
				return nil, fmt.Errorf("%s=%q: not a number", name, mf)
			}
			frac = v
		}
	}
	if frac == 0 {
		frac = DefaultGPUMemoryFraction
	}
	if !(frac > 0 && frac <= 1) {
		return nil, fmt.Errorf("gpu_memory_fraction %g: want a fraction in (0, 1]", frac)
	}
	opts["memory_fraction"] = float32(frac)
	if v := getenv("XLA_PYTHON_CLIENT_PREALLOCATE"); v != "" {
		opts["preallocate"] = v != "false" && v != "False" && v != "0"
	}
	return opts, nil
}

// Environment returns the environment changes a CUDA run needs, as KEY=VALUE: XLA_FLAGS with
// --xla_gpu_cuda_data_dir (unless it names one already), --xla_gpu_deterministic_ops for
// Deterministic, --xla_gpu_enable_triton_gemm=false without TF32 (XLA's Triton GEMMs run float32
// dots in TF32 whatever NVIDIA_TF32_OVERRIDE says), NVIDIA_TF32_OVERRIDE=0 without TF32 (cuBLAS
// and cuDNN), and PATH with ptxas's directory first. getenv reads the current values.
func (o GPUOptions) Environment(c CUDA, getenv func(string) string) []string {
	flags := getenv("XLA_FLAGS")
	add := func(name, value string) {
		if xlaFlagValue(flags, name) == "" {
			flags = strings.TrimSpace(flags + " --" + name + "=" + value)
		}
	}
	if c.DataDir != "" {
		add("xla_gpu_cuda_data_dir", c.DataDir)
	}
	if o.Deterministic {
		add("xla_gpu_deterministic_ops", "true")
	}
	if !o.TF32 {
		add("xla_gpu_enable_triton_gemm", "false")
	}
	env := []string{"XLA_FLAGS=" + flags}
	if !o.TF32 && getenv("NVIDIA_TF32_OVERRIDE") == "" {
		env = append(env, "NVIDIA_TF32_OVERRIDE=0")
	}
	if c.Ptxas != "" {
		dir := filepath.Dir(c.Ptxas)
		path := getenv("PATH")
		if !slices.Contains(filepath.SplitList(path), dir) {
			env = append(env, "PATH="+dir+string(os.PathListSeparator)+path)
		}
	}
	return env
}

// IsCUDA says whether a configuration names a CUDA plugin: xla:cuda, or a plugin file whose name
// says cuda (JAX's xla_cuda_plugin.so, go-xla's pjrt_c_api_cuda_plugin.so).
func IsCUDA(config string) bool {
	if !IsXLA(config) {
		return false
	}
	_, rest, _ := strings.Cut(config, ":")
	name, _, _ := strings.Cut(rest, ",")
	name = strings.TrimSpace(name)
	return name == "cuda" || strings.Contains(strings.ToLower(filepath.Base(name)), "cuda")
}
