package checkpoint

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockEnv makes this test binary a child process that holds (hold) or tries (try) a directory's
// lock: "hold:DIR" locks DIR, writes DIR/ready and sleeps until killed; "try:DIR" exits 0 when it
// gets the lock and 3 when another process holds it.
const lockEnv = "POSTTRAIN_LOCK_HELPER"

func TestLockHelper(t *testing.T) {
	mode, dir, ok := strings.Cut(os.Getenv(lockEnv), ":")
	if !ok {
		t.Skip("the child process of the lock tests")
	}
	release, err := Lock(dir)
	if mode == "try" {
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		os.Exit(0)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Hour) // until killed (select{} would end as a deadlock)
}

// lockChild starts the child in mode on dir.
func lockChild(t *testing.T, mode, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockEnv+"="+mode+":"+dir)
	return cmd
}

// holdLock starts a child holding dir's lock and waits until it holds it.
func holdLock(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := lockChild(t, "hold", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "ready")); err == nil {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatal("the child never took the lock")
		}
	}
}

// tryLock reports whether a child process gets dir's lock.
func childGetsLock(t *testing.T, dir string) bool {
	t.Helper()
	err := lockChild(t, "try", dir).Run()
	if err == nil {
		return true
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 3 {
		return false
	}
	t.Fatalf("lock child: %v", err)
	return false
}

// A second process is refused a held lock, in one line naming the directory and the holder's
// pid, and so is CheckUnlocked; once the holder is SIGKILLed (no chance to clean up) the lock is
// free again, since the kernel released it.
func TestLock_RefusedWhileHeldFreeAfterSIGKILL(t *testing.T) {
	dir := t.TempDir()
	holder := holdLock(t, dir)
	pid := fmt.Sprintf("pid %d", holder.Process.Pid)
	_, err := Lock(dir)
	if err == nil {
		t.Fatal("a second process got the lock")
	}
	for _, want := range []string{dir, pid, LockName} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("error is not one line: %q", err)
	}
	if err := CheckUnlocked(dir); err == nil || !strings.Contains(err.Error(), pid) {
		t.Errorf("CheckUnlocked while held: %v, want an error naming %s", err, pid)
	}
	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	holder.Wait()
	release, err := Lock(dir)
	if err != nil {
		t.Fatalf("after SIGKILL of the holder: %v", err)
	}
	release()
	if err := CheckUnlocked(dir); err != nil {
		t.Errorf("CheckUnlocked after release: %v", err)
	}
}

// One process may take a directory's lock more than once (the CLI, then the driver): the lock is
// held until the last release, and another process is refused until then.
func TestLock_SharedWithinAProcess(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out") // Lock creates it
	a, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Lock(filepath.Join(dir, ".", "")) // another spelling of the same directory
	if err != nil {
		t.Fatalf("second Lock in the same process: %v", err)
	}
	if err := CheckUnlocked(dir); err != nil {
		t.Errorf("CheckUnlocked of this process's own lock: %v", err)
	}
	a()
	a() // a release is idempotent
	if childGetsLock(t, dir) {
		t.Fatal("another process got the lock while one hold remained")
	}
	b()
	if !childGetsLock(t, dir) {
		t.Fatal("another process was refused after the last release")
	}
	if b, err := os.ReadFile(filepath.Join(dir, LockName)); err != nil || len(b) == 0 {
		t.Errorf("the lock file holds %q (%v), want a pid", b, err)
	}
}
