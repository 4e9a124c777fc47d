package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/trainers/engine/step"
)

// The backend workload is gpu-check's first stage: it says which PJRT plugin a configuration loads
// and which C API versions meet, creates a client, lists its devices and compiles and runs one
// small graph with transcendental functions (on CUDA those need libdevice, the first thing a
// missing CUDA data directory breaks), timing compilation apart from the run.

// backendEnvVars are the variables that decide where XLA looks for its plugin, libraries and tools.
var backendEnvVars = []string{backend.EnvVar, backend.AutoInstallEnv, "GOMLX_NO_AUTO_INSTALL", "PJRT_PLUGIN_LIBRARY_PATH",
	"XLA_FLAGS", "TF_CPP_MIN_LOG_LEVEL", "TF_CPP_MAX_VLOG_LEVEL", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "NVIDIA_TF32_OVERRIDE", "PATH"}

// BackendResult is the backend workload's output.
type BackendResult struct {
	Workload         string         `json:"workload"`
	Backend          string         `json:"backend"`
	GoXLA            string         `json:"go_xla"`
	ClientAPI        string         `json:"client_api"`
	AutoInstall      bool           `json:"auto_install"`
	PluginPath       string         `json:"plugin_path,omitempty"`
	PluginAPI        string         `json:"plugin_api,omitempty"`
	PluginTable      int            `json:"plugin_api_table_bytes,omitempty"`
	PluginAttributes map[string]any `json:"plugin_attributes,omitempty"`
	Adaptations      []string       `json:"adaptations,omitempty"`       // backend.Adaptations
	XLAVersion       string         `json:"xla_version,omitempty"`       // the plugin's xla_version attribute
	StableHLO        string         `json:"stablehlo_version,omitempty"` // its stablehlo_current_version
	StableHLOMin     string         `json:"stablehlo_minimum_version,omitempty"`
	Description      string         `json:"backend_description"`
	CPUDevices       int            `json:"cpu_devices_requested,omitempty"`
	Devices          []string       `json:"devices"`
	CreateS          float64        `json:"create_s"`
	CompileS         float64        `json:"compile_s"`
	RunS             float64        `json:"run_s"` // on device 0
	MaxAbsErr        float64        `json:"max_abs_err"`
	Runs             []DeviceRun    `json:"device_runs"`
	// Env is the environment the client was created in (posttrain sets XLA_FLAGS, PATH and
	// NVIDIA_TF32_OVERRIDE for a CUDA plugin before it creates the client).
	Env map[string]string `json:"env"`
	// CUDA is what posttrain found for a CUDA plugin (the data directory holding libdevice, ptxas)
	// and the client options it passed; nil for other backends.
	CUDA *CUDASetup `json:"cuda,omitempty"`
}

// DeviceRun is the small graph's run on one device.
type DeviceRun struct {
	Device       int     `json:"device"`
	OutputDevice int     `json:"output_device"` // where the result was: Device, or the run failed
	RunS         float64 `json:"run_s"`
	MaxAbsErr    float64 `json:"max_abs_err"`
}

// CUDASetup is a CUDA plugin's setup as posttrain made it (backend.FindCUDA, GPUOptions).
type CUDASetup struct {
	DataDir       string         `json:"cuda_data_dir"`
	Ptxas         string         `json:"ptxas"`
	ClientOptions map[string]any `json:"client_options"`
}

// Backend checks the plugin of the backend configuration cfg (an XLA one), creates the backend
// (with cpuDevices devices, an XLA CPU plugin's cpu_device_count, when > 0), lists its devices,
// compiles one small graph and runs it on every device against a float64 result. Progress goes
// to log.
func Backend(cfg string, cpuDevices int, log io.Writer) (*BackendResult, error) {
	res := &BackendResult{Workload: "backend", Backend: cfg, GoXLA: moduleVersion("github.com/gomlx/go-xla"),
		ClientAPI: backend.ClientAPI, AutoInstall: backend.AutoInstallAllowed(), CPUDevices: cpuDevices, Env: map[string]string{}}
	if backend.IsXLA(cfg) {
		info, err := backend.CheckPlugin(cfg)
		if err != nil {
			return nil, err
		}
		res.PluginPath, res.PluginAPI, res.PluginTable = info.Path, info.API, info.TableSize
		res.Adaptations = backend.Adaptations(cfg, info)
		logf(log, "backend %s: plugin %s, PJRT C API %s; client %s", cfg, orDash(info.Path), orDash(info.API), backend.ClientAPI)
	}
	t0 := time.Now()
	b, err := backend.NewWithOptions(cfg, backend.Options{CPUDevices: cpuDevices})
	if err != nil {
		return nil, err
	}
	defer b.Finalize()
	res.CreateS = time.Since(t0).Seconds()
	for _, k := range backendEnvVars {
		if v, ok := os.LookupEnv(k); ok {
			res.Env[k] = v
		}
	}
	if backend.IsCUDA(cfg) || backend.IsCUDA("xla:"+res.PluginPath) {
		c, err := backend.HostProbe().FindCUDA(res.PluginPath)
		if err != nil {
			return nil, err
		}
		opts, err := backend.GPUOptions{}.ClientOptions(os.Getenv)
		if err != nil {
			return nil, err
		}
		res.CUDA = &CUDASetup{DataDir: c.DataDir, Ptxas: c.Ptxas, ClientOptions: opts}
		logf(log, "backend %s: CUDA data directory %s, ptxas %s, client options %v", cfg, c.DataDir, orDash(c.Ptxas), opts)
	}
	res.Description = b.Description()
	for d := range b.NumDevices() {
		res.Devices = append(res.Devices, b.DeviceDescription(backends.DeviceNum(d)))
	}
	if cpuDevices > 0 && len(res.Devices) != cpuDevices {
		return nil, fmt.Errorf("asked the plugin for %d CPU devices, it made %d (%q)", cpuDevices, len(res.Devices), res.Devices)
	}
	if backend.IsXLA(cfg) {
		res.PluginAttributes = backend.PluginAttributes(res.PluginPath)
		res.XLAVersion = versionString(res.PluginAttributes["xla_version"])
		res.StableHLO = versionString(res.PluginAttributes["stablehlo_current_version"])
		res.StableHLOMin = versionString(res.PluginAttributes["stablehlo_minimum_version"])
		logf(log, "backend %s: xla_version %s, StableHLO %s (minimum %s)", cfg, orDash(res.XLAVersion), orDash(res.StableHLO), orDash(res.StableHLOMin))
	}
	logf(log, "backend %s: client created in %.2fs: %s; %d devices %q", cfg, res.CreateS, res.Description, len(res.Devices), res.Devices)
	if err := backendGraph(b, res); err != nil {
		return nil, err
	}
	logf(log, "backend %s: small graph compiled in %.3fs, ran in %.4fs on device 0, on all %d devices max |Δ| %.2g", cfg, res.CompileS, res.RunS, len(res.Runs), res.MaxAbsErr)
	return res, nil
}

// versionString writes a plugin attribute as a version: [1 20 0] → "1.20.0", 2 → "2".
func versionString(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case []int64:
		parts := make([]string, len(v))
		for i, x := range v {
			parts[i] = fmt.Sprint(x)
		}
		return strings.Join(parts, ".")
	}
	return fmt.Sprint(v)
}

// backendGraph compiles y = tanh(exp(x)·0.1) + log1p(x²) + erf(x) on 1024 values once and runs it
// on every device, each result compared with the host's float64 result.
func backendGraph(b backends.Backend, res *BackendResult) error {
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(i-512) / 256
	}
	before := backend.Compiled()
	err := step.Catch("small graph", func() error {
		exec, err := graph.NewExec(b, func(x *graph.Node) *graph.Node {
			return graph.Add(graph.Add(graph.Tanh(graph.MulScalar(graph.Exp(x), 0.1)), graph.Log1P(graph.Square(x))), graph.Erf(x))
		})
		if err != nil {
			return err
		}
		defer exec.Finalize()
		if err := exec.PreCompile(x); err != nil {
			return err
		}
		for d := range b.NumDevices() {
			run, err := deviceRun(exec, backends.DeviceNum(d), x)
			if err != nil {
				return fmt.Errorf("device %d: %w", d, err)
			}
			res.Runs = append(res.Runs, run)
		}
		return nil
	})
	if err != nil {
		return err
	}
	res.CompileS = (backend.Compiled().Time - before.Time).Seconds()
	if c := backend.Compiled().Graphs - before.Graphs; c != 1 {
		return fmt.Errorf("small graph: compiled %d times for %d devices, want once", c, len(res.Runs))
	}
	res.RunS = res.Runs[0].RunS
	for _, r := range res.Runs {
		res.MaxAbsErr = max(res.MaxAbsErr, r.MaxAbsErr)
		if r.OutputDevice != r.Device {
			return fmt.Errorf("small graph: run on device %d left its result on device %d", r.Device, r.OutputDevice)
		}
		if r.MaxAbsErr > 1e-4 || math.IsNaN(r.MaxAbsErr) {
			return fmt.Errorf("small graph: device %d: max |Δ| %.3g from the float64 result (> 1e-4)", r.Device, r.MaxAbsErr)
		}
	}
	return nil
}

// deviceRun runs the compiled graph on device d and checks its result.
func deviceRun(exec *graph.Exec, d backends.DeviceNum, x []float32) (DeviceRun, error) {
	run := DeviceRun{Device: int(d), OutputDevice: -1}
	t0 := time.Now()
	outs, _, err := exec.ExecWithGraphOnDevice(d, x)
	if err != nil {
		return run, err
	}
	defer func() { _ = outs[0].FinalizeAll() }()
	if on, err := outs[0].Device(); err == nil {
		run.OutputDevice = int(on)
	}
	out := tensors.MustCopyFlatData[float32](outs[0])
	run.RunS = time.Since(t0).Seconds()
	for i, v := range x {
		want := math.Tanh(math.Exp(float64(v))*0.1) + math.Log1p(float64(v)*float64(v)) + math.Erf(float64(v))
		run.MaxAbsErr = max(run.MaxAbsErr, math.Abs(float64(out[i])-want))
	}
	return run, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// moduleVersion is the version of a module linked into this binary ("" when unknown).
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return ""
}
