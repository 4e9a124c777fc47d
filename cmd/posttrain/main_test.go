package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/backend"
)

// TestMain runs every command of these tests on the tests' backend (backend.ForTests: the pure-Go
// backend unless $POSTTRAIN_TEST_BACKEND names another), whatever plugin is installed and whatever
// $GOMLX_BACKEND the shell has, so that a command's default choice does not change what is checked.
func TestMain(m *testing.M) {
	os.Setenv(backend.EnvVar, backend.ForTests())
	os.Exit(m.Run())
}

// runFiles runs the CLI as main does, with stdout and stderr in files, and returns the exit
// status and stderr.
func runFiles(t *testing.T, args ...string) (int, string) {
	t.Helper()
	rc, _, stderr := runFilesOut(t, args...)
	return rc, stderr
}

// runFilesOut is runFiles that returns stdout too.
func runFilesOut(t *testing.T, args ...string) (rc int, stdout, stderr string) {
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
	rc = run(append([]string{"posttrain"}, args...), out, errF)
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errF.Name())
	return rc, string(o), string(e)
}

// An unknown command followed by flags is named as such, with the real commands listed (it used
// to say "flag provided but not defined: -model").
func TestRun_UnknownCommandIsNamed(t *testing.T) {
	rc, stderr := runFiles(t, "frobnicate", "--model", "M")
	if rc != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) || !strings.Contains(stderr, "valid: convert, data, demo") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("exit %d, stderr %q", rc, stderr)
	}
	for _, args := range [][]string{{"version"}, {"help"}, {"--version"}} {
		if rc, stderr := runFiles(t, args...); rc != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, rc, stderr)
		}
	}
}

// $POSTTRAIN_CPUPROFILE gets a CPU profile of the command (gzip-compressed protobuf, as
// runtime/pprof writes); a file that cannot be made is said on stderr in one line and the
// command still runs.
func TestRun_CPUProfileEnv(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.prof")
	t.Setenv(CPUProfileEnv, prof)
	if rc, stderr := runFiles(t, "init", "--preset", "tiny", "--out", filepath.Join(dir, "m")); rc != 0 {
		t.Fatalf("exit %d: %s", rc, stderr)
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile %s: %d bytes, err %v; want a gzip-compressed profile", prof, len(b), err)
	}
	t.Setenv(CPUProfileEnv, filepath.Join(dir, "no-such-dir", "cpu.prof"))
	rc, stderr := runFiles(t, "init", "--preset", "tiny", "--out", filepath.Join(dir, "m2"))
	if rc != 0 || !strings.Contains(stderr, "$"+CPUProfileEnv) || strings.Count(stderr, "\n") != 1 {
		t.Errorf("unwritable profile: exit %d, stderr %q; want exit 0 and one line naming $%s", rc, stderr, CPUProfileEnv)
	}
}

// TRL's command lines paste: an unknown flag names its nearest (snake_case read as kebab-case),
// and a boolean flag followed by HF's True/False takes it as its value.
func TestRun_TRLCommandLines(t *testing.T) {
	rc, stderr := runFiles(t, "sft", "--learnin_rate", "1e-5")
	if rc != 2 || !strings.Contains(stderr, "did you mean --learning-rate?") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("misspelt flag: exit %d, stderr %q", rc, stderr)
	}
	rc, stderr = runFiles(t, "bench", "memory", "--presett", "tiny")
	if rc != 2 || !strings.Contains(stderr, "did you mean --preset?") {
		t.Errorf("misspelt bench flag: exit %d, stderr %q", rc, stderr)
	}
	// --bf16 True --gradient_checkpointing False are parsed: the run stops at the options'
	// validation (a negative learning rate), past flag parsing, not at an "unexpected argument".
	rc, stderr = runFiles(t, "sft", "--model_name_or_path", "M", "--dataset_name", "d.jsonl", "--output_dir", filepath.Join(t.TempDir(), "out"),
		"--bf16", "True", "--gradient_checkpointing", "False", "--learning_rate", "-1")
	if rc != 2 || strings.Contains(stderr, "unexpected argument") || !strings.Contains(stderr, "learning_rate") {
		t.Errorf("HF booleans: exit %d, stderr %q", rc, stderr)
	}
	rc, stderr = runFiles(t, "sft", "--dataset", "a.jsonl", "--dataset_name", "b.jsonl", "--model", "M")
	if rc != 2 || !strings.Contains(stderr, "--dataset is given twice (as --dataset and --dataset_name)") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("repeated --dataset: exit %d, stderr %q", rc, stderr)
	}
	app := newApp()
	got := hfBoolValues(app, []string{"posttrain", "sft", "--bf16", "True", "--gradient_checkpointing", "no", "--seed", "1", "--resume", "--model", "M"})
	want := []string{"posttrain", "sft", "--bf16=true", "--gradient_checkpointing=false", "--seed", "1", "--resume", "--model", "M"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("hfBoolValues: %v, want %v", got, want)
	}
}

// An error names its command once, however many layers prefix it.
func TestOnePrefix(t *testing.T) {
	for in, want := range map[string]string{
		"grpo: grpo: step 3: reward": "grpo: step 3: reward",
		"sft: sft: sft: x":           "sft: x",
		"grpo: step 3: grpo: x":      "grpo: step 3: grpo: x",
		"a b: a b: x":                "a b: a b: x",
	} {
		if got := onePrefix(in); got != want {
			t.Errorf("onePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}
