package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runFiles runs the CLI as main does, with stdout and stderr in files, and returns the exit
// status and stderr.
func runFiles(t *testing.T, args ...string) (int, string) {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	errF, err := os.Create(filepath.Join(dir, "err"))
	if err != nil {
		t.Fatal(err)
	}
	defer errF.Close()
	rc := run(append([]string{"posttrain"}, args...), out, errF)
	b, _ := os.ReadFile(errF.Name())
	return rc, string(b)
}

// An unknown command followed by flags is named as such, with the real commands listed (it used
// to say "flag provided but not defined: -model").
func TestRun_UnknownCommandIsNamed(t *testing.T) {
	rc, stderr := runFiles(t, "frobnicate", "--model", "M")
	if rc != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) || !strings.Contains(stderr, "valid: data, demo") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", rc, stderr)
	}
	for _, args := range [][]string{{"version"}, {"help"}, {"--version"}} {
		if rc, stderr := runFiles(t, args...); rc != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, rc, stderr)
		}
	}
}
