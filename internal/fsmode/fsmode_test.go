package fsmode

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Under umask 022 the temporaries are 0644 files and 0755 directories (os's are 0600 and 0700),
// named after the pattern, and never reuse an existing name.
func TestModesAndNames(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	f, err := CreateTemp(dir, ".args.yaml.tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	d, err := MkdirTemp(dir, ".checkpoint-3.tmp-")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path, prefix string
		mode         os.FileMode
	}{{f.Name(), ".args.yaml.tmp-", 0o644}, {d, ".checkpoint-3.tmp-", 0o755 | os.ModeDir}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s: mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
		if !strings.HasPrefix(filepath.Base(c.path), c.prefix) || filepath.Dir(c.path) != dir {
			t.Errorf("%s: not %s* in %s", c.path, c.prefix, dir)
		}
	}
	seen := map[string]bool{}
	for range 50 {
		d, err := MkdirTemp(dir, "x*y")
		if err != nil {
			t.Fatal(err)
		}
		if seen[d] || !strings.HasSuffix(d, "y") {
			t.Fatalf("name %s reused or without its suffix", d)
		}
		seen[d] = true
	}
	if _, err := CreateTemp(dir, "a/b*"); err == nil {
		t.Error("a pattern with a path separator was accepted")
	}
}

// FreeBytes answers for a path not yet made from the nearest directory above it, and agrees with
// statfs on that directory.
func TestFreeBytes(t *testing.T) {
	dir := t.TempDir()
	free, ok := FreeBytes(filepath.Join(dir, "a", "b", "c"))
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	want := int64(st.Bavail) * int64(st.Bsize)
	// Other writers on the machine move it a little between the two reads.
	if !ok || free <= 0 || free < want-1<<30 || free > want+1<<30 {
		t.Fatalf("FreeBytes = %d, %v; statfs says %d", free, ok, want)
	}
}
