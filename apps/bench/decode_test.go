package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CacheCopyOps picks the newest decode step among XLA's dumped modules (the one with a parameter
// of the cache's type) and counts its copies of that type, in the lines XLA writes (the copies the
// decode step made before its cache was aliased, as XLA printed them).
func TestCacheCopyOps(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string, age time.Duration) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		when := time.Now().Add(-age)
		if err := os.Chtimes(p, when, when); err != nil {
			t.Fatal(err)
		}
	}
	const cache = "f32[16,3,256,64]"
	prefill := "ENTRY %main {\n  %Arg_0.1 = s32[16,64]{1,0} parameter(0)\n  %copy.2 = " + cache + "{3,2,1,0} copy(f32[16,3,256,64]{3,2,1,0} %x)\n}\n"
	copying := "ENTRY %main {\n  %Arg_4.1 = " + cache + "{3,2,1,0} parameter(4)\n" +
		strings.Repeat("  %copy.1080 = "+cache+"{3,2,1,0} copy(f32[16,3,256,64]{3,2,1,0} %Arg_4.1)\n", 60) +
		"  %copy.7 = f32[16,64]{1,0} copy(f32[16,64]{1,0} %y)\n}\n"
	inPlace := "ENTRY %main {\n  %Arg_4.1 = " + cache + "{3,2,1,0} parameter(4)\n  %dynamic-update-slice.3 = " + cache + "{3,2,1,0} dynamic-update-slice(%Arg_4.1, %u, %z, %z, %s, %z)\n}\n"
	write("module_0001.prefill.cpu_after_optimizations.txt", prefill, 3*time.Second)
	write("module_0002.decode.cpu_after_optimizations.txt", copying, 2*time.Second)
	write("module_0002.decode.cpu_before_optimizations.txt", inPlace, 0) // not an optimised module
	if n, err := CacheCopyOps(dir, "f32", []int{16, 3, 256, 64}); err != nil || n != 60 {
		t.Errorf("copying step: %d, %v; want 60", n, err)
	}
	write("module_0003.decode.cpu_after_optimizations.txt", inPlace, time.Second)
	if n, err := CacheCopyOps(dir, "f32", []int{16, 3, 256, 64}); err != nil || n != 0 {
		t.Errorf("in-place step (the newest): %d, %v; want 0", n, err)
	}
	if _, err := CacheCopyOps(dir, "bf16", []int{16, 3, 256, 64}); err == nil || !strings.Contains(err.Error(), "no decode step with a bf16[16,3,256,64] parameter") {
		t.Errorf("no such cache: err = %v", err)
	}
}
