package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime/debug"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
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
	Workload         string            `json:"workload"`
	Backend          string            `json:"backend"`
	GoXLA            string            `json:"go_xla"`
	ClientAPI        string            `json:"client_api"`
	AutoInstall      bool              `json:"auto_install"`
	PluginPath       string            `json:"plugin_path,omitempty"`
	PluginAPI        string            `json:"plugin_api,omitempty"`
	PluginAttributes map[string]any    `json:"plugin_attributes,omitempty"`
	Description      string            `json:"backend_description"`
	Devices          []string          `json:"devices"`
	CreateS          float64           `json:"create_s"`
	CompileS         float64           `json:"compile_s"`
	RunS             float64           `json:"run_s"`
	MaxAbsErr        float64           `json:"max_abs_err"`
	Env              map[string]string `json:"env"`
}

// Backend checks the plugin of the backend configuration cfg (an XLA one), creates the backend,
// lists its devices and runs one small graph against a float64 result. Progress goes to log.
func Backend(cfg string, log io.Writer) (*BackendResult, error) {
	res := &BackendResult{Workload: "backend", Backend: cfg, GoXLA: moduleVersion("github.com/gomlx/go-xla"),
		ClientAPI: backend.ClientAPI, AutoInstall: backend.AutoInstallAllowed(), Env: map[string]string{}}
	for _, k := range backendEnvVars {
		if v, ok := os.LookupEnv(k); ok {
			res.Env[k] = v
		}
	}
	if backend.IsXLA(cfg) {
		info, err := backend.CheckPlugin(cfg)
		res.PluginPath, res.PluginAPI = info.Path, info.API
		logf(log, "backend %s: plugin %q, PJRT C API %s; client %s", cfg, info.Path, orDash(info.API), backend.ClientAPI)
		if err != nil {
			return nil, err
		}
	}
	t0 := time.Now()
	b, err := backend.New(cfg)
	if err != nil {
		return nil, err
	}
	defer b.Finalize()
	res.CreateS = time.Since(t0).Seconds()
	res.Description = b.Description()
	for d := range b.NumDevices() {
		res.Devices = append(res.Devices, b.DeviceDescription(backends.DeviceNum(d)))
	}
	if backend.IsXLA(cfg) {
		res.PluginAttributes = backend.PluginAttributes(cfg)
	}
	logf(log, "backend %s: client created in %.1fs: %s; devices %q", cfg, res.CreateS, res.Description, res.Devices)
	if err := backendGraph(b, res); err != nil {
		return nil, err
	}
	logf(log, "backend %s: small graph compiled in %.2fs, ran in %.3fs, max |Δ| %.2g", cfg, res.CompileS, res.RunS, res.MaxAbsErr)
	return res, nil
}

// backendGraph compiles and runs y = tanh(exp(x)·0.1) + log1p(x²) + erf(x) on 1024 values and
// compares it with the host's float64 result.
func backendGraph(b backends.Backend, res *BackendResult) error {
	x := make([]float32, 1024)
	for i := range x {
		x[i] = float32(i-512) / 256
	}
	before := backend.Compiled()
	var out []float32
	var runS float64
	err := catchPanic(func() error {
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
		t0 := time.Now()
		outs, err := exec.Exec(x)
		if err != nil {
			return err
		}
		out = tensors.MustCopyFlatData[float32](outs[0])
		runS = time.Since(t0).Seconds()
		return nil
	})
	if err != nil {
		return fmt.Errorf("small graph: %w", err)
	}
	res.CompileS, res.RunS = (backend.Compiled().Time - before.Time).Seconds(), runS
	for i, v := range x {
		want := math.Tanh(math.Exp(float64(v))*0.1) + math.Log1p(float64(v)*float64(v)) + math.Erf(float64(v))
		res.MaxAbsErr = max(res.MaxAbsErr, math.Abs(float64(out[i])-want))
	}
	if res.MaxAbsErr > 1e-4 || math.IsNaN(res.MaxAbsErr) {
		return fmt.Errorf("small graph: max |Δ| %.3g from the float64 result (> 1e-4)", res.MaxAbsErr)
	}
	return nil
}

func catchPanic(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return fn()
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
