package backend

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// wheelFiles reads testdata/cuda-wheels.txt (scripts/gpu/cuda-wheels.sh): for each pinned wheel,
// the plugin, ptxas and libdevice paths it installs into site-packages.
func wheelFiles(t *testing.T) map[string][]string {
	t.Helper()
	f, err := os.Open("testdata/cuda-wheels.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wheels := map[string][]string{}
	var cur string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		switch {
		case len(fields) == 3 && fields[0] == "wheel":
			cur = fields[1]
			wheels[cur] = nil
		case len(fields) == 3 && fields[0] == "file" && cur != "":
			wheels[cur] = append(wheels[cur], fields[1])
		}
	}
	return wheels
}

// sandboxProbe is a Probe that sees only root (the files a test made), site as python3's
// site-packages, env as the environment, and no device nodes.
func sandboxProbe(root string, site []string, env map[string]string) Probe {
	inside := func(p string) bool { return strings.HasPrefix(p, root+string(filepath.Separator)) }
	return Probe{
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		Stat: func(p string) (fs.FileInfo, error) {
			if !inside(p) {
				return nil, fs.ErrNotExist
			}
			return os.Stat(p)
		},
		Glob: func(pattern string) ([]string, error) {
			if !inside(pattern) {
				return nil, nil
			}
			return filepath.Glob(pattern)
		},
		LookPath:     func(string) (string, error) { return "", errors.New("not on PATH") },
		SitePackages: func() []string { return site },
		Home:         filepath.Join(root, "home"),
	}
}

// install makes the wheels' files (empty; ptxas executable) under site.
func install(t *testing.T, site string, files []string) {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(site, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// What `pip install "jax[cuda13]"` and "jax[cuda12]" lay out, file for file as the real wheels
// do, is found: the plugin, the data directory holding nvvm/libdevice, and ptxas.
func TestFindCUDA_RealWheelLayouts(t *testing.T) {
	wheels := wheelFiles(t)
	pick := func(prefixes ...string) []string {
		var files []string
		for _, p := range prefixes {
			n := 0
			for w, fs := range wheels {
				if strings.HasPrefix(w, p) {
					files = append(files, fs...)
					n++
				}
			}
			if n != 1 {
				t.Fatalf("testdata/cuda-wheels.txt has %d wheels named %s*, want 1", n, p)
			}
		}
		return files
	}
	cu13 := pick("jax_cuda13_pjrt-", "nvidia_cuda_nvcc-13", "nvidia_nvvm-13")
	cu12 := pick("jax_cuda12_pjrt-", "nvidia_cuda_nvcc_cu12-")
	for _, c := range []struct {
		name           string
		files          []string
		plugin, cudaNN string // expected plugin folder, data directory under nvidia/
	}{
		{"cuda13", cu13, "xla_cuda13", "cu13"},
		{"cuda12", cu12, "xla_cuda12", "cuda_nvcc"},
		{"both", append(append([]string{}, cu12...), cu13...), "xla_cuda13", "cu13"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			site := filepath.Join(root, "venv/lib/python3.12/site-packages")
			install(t, site, c.files)
			got, err := sandboxProbe(root, []string{filepath.Join(root, "nowhere"), site}, map[string]string{}).FindCUDA("")
			if err != nil {
				t.Fatal(err)
			}
			want := CUDA{
				Plugin:  filepath.Join(site, "jax_plugins", c.plugin, "xla_cuda_plugin.so"),
				DataDir: filepath.Join(site, "nvidia", c.cudaNN),
				Ptxas:   filepath.Join(site, "nvidia", c.cudaNN, "bin", "ptxas"),
			}
			if got != want {
				t.Errorf("FindCUDA = %+v, want %+v", got, want)
			}
		})
	}
}

func TestFindCUDA_SearchOrderAndErrors(t *testing.T) {
	wheels := wheelFiles(t)
	var cu13 []string
	for w, fs := range wheels {
		if strings.HasPrefix(w, "jax_cuda13_pjrt-") || strings.HasPrefix(w, "nvidia_nvvm-") || strings.HasPrefix(w, "nvidia_cuda_nvcc-13") {
			cu13 = append(cu13, fs...)
		}
	}
	root := t.TempDir()
	site := filepath.Join(root, "site")

	// Nothing installed: one line saying what to install.
	_, err := sandboxProbe(root, []string{site}, map[string]string{}).FindCUDA("")
	if err == nil || !strings.Contains(err.Error(), `pip install "jax[cuda13]==0.11.2"`) || !strings.Contains(err.Error(), "jax_plugins/xla_cuda13") || strings.Contains(err.Error(), "\n") {
		t.Errorf("no plugin: err = %v", err)
	}
	// No python3: said so.
	_, err = sandboxProbe(root, nil, map[string]string{}).FindCUDA("")
	if err == nil || !strings.Contains(err.Error(), "no python3 on PATH") {
		t.Errorf("no python3: err = %v", err)
	}

	// The plugin alone: the missing libdevice is named.
	install(t, site, []string{"jax_plugins/xla_cuda13/xla_cuda_plugin.so"})
	_, err = sandboxProbe(root, []string{site}, map[string]string{}).FindCUDA("")
	if err == nil || !strings.Contains(err.Error(), "nvvm/libdevice/libdevice*.bc") || !strings.Contains(err.Error(), "xla_cuda13/xla_cuda_plugin.so") {
		t.Errorf("no libdevice: err = %v", err)
	}

	install(t, site, cu13)
	// $CUDA_HOME is found where the wheels have no libdevice.
	cudaHome := filepath.Join(root, "cuda-12.8")
	install(t, cudaHome, []string{"nvvm/libdevice/libdevice.10.bc", "bin/ptxas"})
	os.RemoveAll(filepath.Join(site, "nvidia/cu13/nvvm"))
	got, err := sandboxProbe(root, []string{site}, map[string]string{"CUDA_HOME": cudaHome}).FindCUDA("")
	if err != nil || got.DataDir != cudaHome || got.Ptxas != filepath.Join(site, "nvidia/cu13/bin/ptxas") {
		t.Errorf("CUDA_HOME: %+v, %v", got, err)
	}
	install(t, site, cu13)

	// $PJRT_PLUGIN_LIBRARY_PATH comes before site-packages; XLA_FLAGS' data directory before the wheels.
	goxla := filepath.Join(root, "go-xla")
	install(t, goxla, []string{PluginFile("cuda")})
	env := map[string]string{"PJRT_PLUGIN_LIBRARY_PATH": filepath.Join(root, "empty") + ":" + goxla,
		"XLA_FLAGS": "--xla_dump_to=/tmp/d --xla_gpu_cuda_data_dir=" + cudaHome}
	got, err = sandboxProbe(root, []string{site}, env).FindCUDA("")
	if err != nil || got.Plugin != filepath.Join(goxla, PluginFile("cuda")) || got.DataDir != cudaHome {
		t.Errorf("PJRT_PLUGIN_LIBRARY_PATH, XLA_FLAGS: %+v, %v", got, err)
	}
	env["XLA_FLAGS"] = "--xla_gpu_cuda_data_dir " + filepath.Join(root, "empty")
	if _, err = sandboxProbe(root, []string{site}, env).FindCUDA(""); err == nil || !strings.Contains(err.Error(), "XLA_FLAGS names --xla_gpu_cuda_data_dir="+filepath.Join(root, "empty")) {
		t.Errorf("XLA_FLAGS with no libdevice: err = %v", err)
	}

	// A plugin given by path: only the data directory and ptxas are searched, beside it first.
	given := filepath.Join(site, "jax_plugins/xla_cuda13/xla_cuda_plugin.so")
	got, err = sandboxProbe(root, nil, map[string]string{}).FindCUDA(given)
	if err != nil || got.Plugin != given || got.DataDir != filepath.Join(site, "nvidia/cu13") {
		t.Errorf("given plugin: %+v, %v", got, err)
	}
}

func TestProbe_NVIDIADevices(t *testing.T) {
	for _, c := range []struct {
		name  string
		globs map[string][]string
		env   map[string]string
		want  bool
	}{
		{"none", nil, nil, false},
		{"dev node", map[string][]string{"/dev/nvidia[0-9]*": {"/dev/nvidia0"}}, nil, true},
		{"proc", map[string][]string{"/proc/driver/nvidia/gpus/*": {"/proc/driver/nvidia/gpus/0000:00:04.0"}}, nil, true},
		{"hidden", map[string][]string{"/dev/nvidia[0-9]*": {"/dev/nvidia0"}}, map[string]string{"CUDA_VISIBLE_DEVICES": ""}, false},
		{"hidden -1", map[string][]string{"/dev/nvidia[0-9]*": {"/dev/nvidia0"}}, map[string]string{"CUDA_VISIBLE_DEVICES": "-1"}, false},
		{"visible", map[string][]string{"/dev/nvidia[0-9]*": {"/dev/nvidia0"}}, map[string]string{"CUDA_VISIBLE_DEVICES": "0"}, true},
	} {
		p := Probe{
			LookupEnv: func(k string) (string, bool) { v, ok := c.env[k]; return v, ok },
			Glob:      func(pattern string) ([]string, error) { return c.globs[pattern], nil },
		}
		if got := p.NVIDIADevices(); got != c.want {
			t.Errorf("%s: NVIDIADevices = %v, want %v", c.name, got, c.want)
		}
	}
}

// The CUDA client's options read JAX's variables as jaxlib 0.11.2's
// generate_pjrt_gpu_plugin_options does.
func TestGPUOptions_ClientOptions(t *testing.T) {
	for _, c := range []struct {
		name string
		o    GPUOptions
		env  map[string]string
		want map[string]any
		err  string
	}{
		{"defaults", GPUOptions{}, nil, map[string]any{"allocator": "default", "memory_fraction": float32(DefaultGPUMemoryFraction)}, ""},
		{"jax fraction", GPUOptions{}, map[string]string{"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, map[string]any{"allocator": "default", "memory_fraction": float32(0.5)}, ""},
		{"new name", GPUOptions{}, map[string]string{"XLA_CLIENT_MEM_FRACTION": "0.6"}, map[string]any{"allocator": "default", "memory_fraction": float32(0.6)}, ""},
		{"flag wins", GPUOptions{MemoryFraction: 0.95}, map[string]string{"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"}, map[string]any{"allocator": "default", "memory_fraction": float32(0.95)}, ""},
		{"no prealloc", GPUOptions{}, map[string]string{"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "Platform"},
			map[string]any{"allocator": "platform", "memory_fraction": float32(DefaultGPUMemoryFraction), "preallocate": false}, ""},
		{"prealloc", GPUOptions{}, map[string]string{"XLA_PYTHON_CLIENT_PREALLOCATE": "true"},
			map[string]any{"allocator": "default", "memory_fraction": float32(DefaultGPUMemoryFraction), "preallocate": true}, ""},
		{"both names", GPUOptions{}, map[string]string{"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5", "XLA_CLIENT_MEM_FRACTION": ".5"}, nil, "both set"},
		{"bad number", GPUOptions{}, map[string]string{"XLA_PYTHON_CLIENT_MEM_FRACTION": "half"}, nil, `XLA_PYTHON_CLIENT_MEM_FRACTION="half": not a number`},
		{"out of range", GPUOptions{MemoryFraction: 1.5}, nil, nil, "gpu_memory_fraction 1.5"},
		{"bad allocator", GPUOptions{}, map[string]string{"XLA_PYTHON_CLIENT_ALLOCATOR": "arena"}, nil, `XLA_PYTHON_CLIENT_ALLOCATOR="arena"`},
	} {
		got, err := c.o.ClientOptions(func(k string) string { return c.env[k] })
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want …%s…", c.name, err, c.err)
			}
		case err != nil || !reflect.DeepEqual(got, c.want):
			t.Errorf("%s: %v, %v, want %v", c.name, got, err, c.want)
		}
	}
}

func TestGPUOptions_Environment(t *testing.T) {
	c := CUDA{Plugin: "/s/jax_plugins/xla_cuda13/xla_cuda_plugin.so", DataDir: "/s/nvidia/cu13", Ptxas: "/s/nvidia/cu13/bin/ptxas"}
	env := map[string]string{"PATH": "/usr/bin"}
	get := func(k string) string { return env[k] }
	got := GPUOptions{}.Environment(c, get)
	want := []string{"XLA_FLAGS=--xla_gpu_cuda_data_dir=/s/nvidia/cu13 --xla_gpu_enable_triton_gemm=false", "NVIDIA_TF32_OVERRIDE=0", "PATH=/s/nvidia/cu13/bin:/usr/bin"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("defaults: %q, want %q", got, want)
	}
	// The user's XLA_FLAGS are kept, their own data directory and TF32 setting win; determinism asked.
	env = map[string]string{"PATH": "/s/nvidia/cu13/bin:/usr/bin", "XLA_FLAGS": "--xla_gpu_cuda_data_dir=/mine --xla_gpu_enable_triton_gemm=true", "NVIDIA_TF32_OVERRIDE": "1"}
	got = GPUOptions{Deterministic: true}.Environment(c, get)
	want = []string{"XLA_FLAGS=--xla_gpu_cuda_data_dir=/mine --xla_gpu_enable_triton_gemm=true --xla_gpu_deterministic_ops=true"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("user's flags: %q, want %q", got, want)
	}
	got = GPUOptions{TF32: true}.Environment(CUDA{}, func(string) string { return "" })
	if want := []string{"XLA_FLAGS="}; !reflect.DeepEqual(got, want) {
		t.Errorf("tf32: %q, want %q", got, want)
	}
}

func TestIsCUDA(t *testing.T) {
	for cfg, want := range map[string]bool{
		"xla:cuda": true, "xla:/s/jax_plugins/xla_cuda13/xla_cuda_plugin.so": true, "xla:/l/pjrt_c_api_cuda_plugin.so,x=1": true,
		"xla:cpu": false, "go": false, "xla:/bin/xla/pjrt_c_api_cpu_plugin.so": false, "go:cuda": false,
	} {
		if got := IsCUDA(cfg); got != want {
			t.Errorf("IsCUDA(%q) = %v", cfg, got)
		}
	}
}

// Without a CUDA plugin on this machine, xla:cuda fails in one line saying what to install.
func TestCheckPlugin_CUDAMissing(t *testing.T) {
	if !xlaCompiled {
		t.Skip("built without XLA")
	}
	t.Setenv("PJRT_PLUGIN_LIBRARY_PATH", t.TempDir())
	if _, err := HostProbe().FindCUDA(""); err == nil {
		t.Skip("this machine has a CUDA plugin")
	}
	_, err := CheckPlugin("xla:cuda")
	if err == nil || !errors.Is(err, ErrNoPlugin) || !strings.Contains(err.Error(), "pip install") || strings.Contains(err.Error(), "\n") {
		t.Errorf("CheckPlugin(xla:cuda) = %v", err)
	}
}
