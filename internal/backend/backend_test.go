package backend

import (
	"os"
	"strings"
	"testing"
)

func TestResolve(t *testing.T) {
	t.Setenv(EnvVar, "")
	for _, c := range []struct{ flag, env, want string }{
		{"", "", Default},
		{"go", "", Default},
		{"", "go", Default},
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

func TestNewGoBackendKeepsStdoutClean(t *testing.T) {
	b, err := New(Default)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	if b.Name() == "" {
		t.Fatal("backend has no name")
	}
}

func TestNewRejectsUnknown(t *testing.T) {
	_, err := New("tpu:v5")
	if err == nil || !strings.Contains(err.Error(), "valid:") {
		t.Fatalf("want an error listing valid backends, got %v", err)
	}
}
