//go:build linux

package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// openPTY opens a pseudo-terminal pair: the master, read by the test, and the terminal side that
// the command writes to.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("open the terminal side: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// On a terminal a training run draws its progress bar on stderr (the CLI's stderr is wrapped for
// the backend notice; the bar used to see the wrapper, not the terminal, and never drew).
func TestRun_ProgressBarOnATerminal(t *testing.T) {
	master, tty := openPTY(t)
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&got, master); close(done) }()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	data := multData(t, dir, "sft", "4")
	rc := run([]string{"posttrain", "sft", "--model", looptest.Model(t), "--dataset", data, "--output-dir", filepath.Join(dir, "run"),
		"--max-steps", "2", "--per-device-train-batch-size", "2", "--backend", "go"}, out, tty)
	tty.Close()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	if rc != 0 || !strings.Contains(got.String(), "step 2/2 [####################] 100%") {
		t.Errorf("exit %d; the terminal got %q", rc, got.String())
	}
}
