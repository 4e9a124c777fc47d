package backend

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

func TestResolve(t *testing.T) {
	t.Setenv(EnvVar, "")
	for _, c := range []struct{ flag, env, want string }{
		{"", "", Default()},
		{"go", "", PureGo},
		{"", "go", PureGo},
		{"go:ops_sequential", "", "go:ops_sequential"},
		{"go:dotgeneral_small", "", "go:parallelism=-1,dotgeneral_small"},
		{"", "xla:cuda", "xla:cuda"},
		{"go:parallelism=4", "xla:cuda", "go:parallelism=4"},
	} {
		os.Setenv(EnvVar, c.env)
		if got := Resolve(c.flag); got != c.want {
			t.Errorf("Resolve(%q) with $%s=%q = %q, want %q", c.flag, EnvVar, c.env, got, c.want)
		}
	}
}

// With no --backend and no $GOMLX_BACKEND, xla:cpu is used exactly when its plugin is found and
// usable; otherwise the pure-Go backend, with the reason in the line every command prints.
func TestDefault_XLACPUWhenItsPluginIsUsable(t *testing.T) {
	found := func(string) (PluginInfo, error) {
		return PluginInfo{Name: "cpu", Path: "/p/pjrt_c_api_cpu_plugin.so", API: "0.115"}, nil
	}
	missing := func(string) (PluginInfo, error) {
		return PluginInfo{Name: "cpu"}, fmt.Errorf(`backend "xla:cpu": no PJRT plugin named "cpu" found: searched bin/xla: %w`, ErrNoPlugin)
	}
	broken := func(string) (PluginInfo, error) {
		return PluginInfo{Name: "cpu"}, errors.New(`backend "xla:cpu": cannot load PJRT plugin /p/x.so: truncated`)
	}
	for _, c := range []struct {
		name     string
		compiled bool
		gpu      bool
		check    func(string) (PluginInfo, error)
		want     string
		why      string
	}{
		{"installed", true, false, found, DefaultCPU, "its plugin is installed"},
		{"missing", true, false, missing, PureGo, "no xla:cpu plugin installed (`make xla-cpu`"},
		{"broken", true, false, broken, PureGo, "cannot be used: backend \"xla:cpu\": cannot load PJRT plugin /p/x.so: truncated"},
		{"noxla", false, false, found, PureGo, "built without XLA"},
		// A GPU box runs on its GPU whatever CPU plugin is installed; CheckPlugin finds the
		// CUDA plugin (or fails naming what to install) when the backend is created.
		{"gpu", true, true, found, DefaultGPU, "an NVIDIA GPU is present"},
		{"gpu-missing-cpu", true, true, missing, DefaultGPU, "an NVIDIA GPU is present"},
		{"gpu-noxla", false, true, found, PureGo, "built without XLA"},
	} {
		got, why := chooseDefault(c.compiled, func() bool { return c.gpu }, c.check)
		if got != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: chooseDefault = %q (%s), want %q (…%s…)", c.name, got, why, c.want, c.why)
		}
	}
	// This process's own choice agrees with what CheckPlugin finds here.
	want := PureGo
	if info, err := CheckPlugin(DefaultCPU); err == nil && info.Path != "" && xlaCompiled {
		want = DefaultCPU
	}
	if xlaCompiled && HostProbe().NVIDIADevices() {
		want = DefaultGPU
	}
	t.Setenv(EnvVar, "")
	if got := Resolve(""); got != want {
		t.Errorf("Resolve(\"\") = %q, want %q", got, want)
	}
	if d := Describe("", nil); !strings.HasPrefix(d, "backend: "+want+" (") || !strings.Contains(d, "the default") {
		t.Errorf("Describe(\"\", nil) = %q", d)
	}
	if d := Describe("go", nil); d != "backend: "+PureGo+" (pure Go; --backend)" {
		t.Errorf("Describe(\"go\", nil) = %q", d)
	}
	t.Setenv(EnvVar, "go")
	if d := Describe("", nil); d != "backend: "+PureGo+" (pure Go; $GOMLX_BACKEND)" {
		t.Errorf("Describe with $GOMLX_BACKEND=go = %q", d)
	}
}

func TestNewGoBackendKeepsStdoutClean(t *testing.T) {
	saved := os.Stdout
	b, err := New(PureGo)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if b.Name() == "" {
		t.Fatal("backend has no name")
	}
	if os.Stdout != saved {
		t.Fatal("stdout not restored")
	}
}

func TestNewRejectsUnknown(t *testing.T) {
	_, err := New("tpu:v5")
	if err == nil || !strings.Contains(err.Error(), "valid:") {
		t.Fatalf("want an error listing valid backends, got %v", err)
	}
}

// A constructor that panics or fails must leave stdout restored and the lock free: a second
// backend in the same process is created at once (it used to wait forever on the lock).
func TestCreateRestoresStdoutAndUnlocksOnEveryPath(t *testing.T) {
	saved := os.Stdout
	for name, construct := range map[string]func(string) (backends.Backend, error){
		"panic": func(string) (backends.Backend, error) { panic("plugin exploded") },
		"error": func(string) (backends.Backend, error) { return nil, errors.New("no device") },
		"nil":   func(string) (backends.Backend, error) { return nil, nil },
	} {
		_, err := create("fake:"+name, construct)
		if err == nil || !strings.Contains(err.Error(), `backend "fake:`+name+`"`) {
			t.Errorf("%s: want an error naming the backend, got %v", name, err)
		}
		if os.Stdout != saved {
			t.Fatalf("%s: stdout left redirected", name)
		}
		done := make(chan error, 1)
		go func() {
			b, err := New(PureGo)
			if err == nil {
				b.Finalize()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: second backend: %v", name, err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: a second backend.New blocks: the lock was not released", name)
		}
	}
}

// Every compilation through a backend from New is counted once, with its time; a shape already
// compiled is not compiled again.
func TestCompiledCountsCompilations(t *testing.T) {
	b := MustNew(PureGo)
	defer b.Finalize()
	exec, err := graph.NewExec(b, func(x *graph.Node) *graph.Node { return graph.MulScalar(x, 2) })
	if err != nil {
		t.Fatal(err)
	}
	before := Compiled()
	run := func(n int) {
		x := make([]float32, n)
		if _, err := exec.Exec(x); err != nil {
			t.Fatal(err)
		}
	}
	run(3)
	run(3)
	mid := Compiled()
	run(5)
	after := Compiled()
	if mid.Graphs-before.Graphs != 1 || after.Graphs-mid.Graphs != 1 {
		t.Fatalf("compilations: %d for two runs of one shape, %d for a new shape; want 1 and 1", mid.Graphs-before.Graphs, after.Graphs-mid.Graphs)
	}
	if after.Time <= before.Time {
		t.Fatalf("compile time did not grow: %v → %v", before.Time, after.Time)
	}
	if Unwrap(b) == b {
		t.Fatal("Unwrap returned the counting wrapper")
	}
}

func TestForTests(t *testing.T) {
	for _, c := range []struct{ env, want string }{
		{"", PureGo},
		{"go", PureGo},
		{" xla:cpu ", "xla:cpu"},
		{"go:ops_sequential", "go:ops_sequential"},
	} {
		t.Setenv(TestEnv, c.env)
		t.Setenv(EnvVar, "xla:cuda") // never read by ForTests
		if got := ForTests(); got != c.want {
			t.Errorf("ForTests() with $%s=%q = %q, want %q", TestEnv, c.env, got, c.want)
		}
	}
}

// A variable only written in a graph still has a parameter node (context.Exec feeds its buffer, to
// donate it), created after every output node when the write comes last: the pure-Go backend
// indexed its inputs by the outputs' node count and panicked "index out of range" on such a graph
// (third_party patch gomlx-v0.26.0-simplego-unused-parameter; the optimizer update of bfloat16
// weights, written from their float32 masters and never read, is one).
func TestPureGo_VariableWrittenLast(t *testing.T) {
	b := MustNew(PureGo)
	defer b.Finalize()
	ctx := context.New()
	a := ctx.VariableWithValue("a", []float32{1, 2})
	w := ctx.VariableWithValue("w", []float32{0, 0})
	exec, err := context.NewExec(b, ctx, func(ctx *context.Context, g *graph.Graph) *graph.Node {
		out := graph.MulScalar(a.ValueGraph(g), 2)
		sum := graph.ReduceAllSum(out)
		w.SetValueGraph(out) // w's parameter node: the graph's last node
		return sum
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	if _, err := exec.Exec(); err != nil {
		t.Fatal(err)
	}
	value, err := w.Value()
	if err != nil {
		t.Fatal(err)
	}
	if got := tensors.MustCopyFlatData[float32](value); got[0] != 2 || got[1] != 4 {
		t.Errorf("w = %v, want [2 4]", got)
	}
}
