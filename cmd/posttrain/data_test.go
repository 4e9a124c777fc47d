package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDataMult_CourseRows(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ kind, golden string }{
		{"dpo", "course_dpo_seed0.jsonl"},
		{"grpo", "course_grpo_seed0.jsonl"},
	} {
		out := filepath.Join(dir, tc.kind+".jsonl")
		if _, err := runCLI(t, "data", "mult", "--kind", tc.kind, "--n", "512", "--seed", "0", "-o", out); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join("../../data/mult/testdata", tc.golden))
		if err != nil {
			t.Fatal(err)
		}
		// Python's json.dumps spaces its separators; compare the rows modulo that spacing.
		norm := strings.NewReplacer(`", "`, `","`, `": `, `":`, `}, {`, `},{`, `], "`, `],"`)
		if norm.Replace(string(got)) != norm.Replace(string(want)) {
			t.Errorf("%s rows differ from the course's", tc.kind)
		}
		check, err := runCLI(t, "data", "check", out)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(check, "conversational, 512 rows") {
			t.Errorf("data check: %q", check)
		}
	}
	// stdout and the kto row count (2 per problem)
	out, err := runCLI(t, "data", "mult", "--kind", "kto", "--n", "3", "--seed", "5")
	if err != nil || strings.Count(out, "\n") != 6 || strings.Count(out, `"label":false`) != 3 {
		t.Errorf("kto to stdout: %v\n%s", err, out)
	}
}

func TestDataMult_BadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"data", "mult", "--kind", "ppo"},
		{"data", "mult", "--kind", "sft", "--n", "0"},
		{"data", "mult"},
		{"data", "mult", "--kind", "sft", "extra"},
		{"data", "check", "--format", "dpo", "x.jsonl"},
		{"data", "check"},
	} {
		_, err := runCLI(t, args...)
		var ue usageError
		if err == nil {
			t.Errorf("%v: want an error", args)
		} else if !errors.As(err, &ue) && !strings.Contains(err.Error(), "Required flag") {
			t.Errorf("%v: %v is not a usage error", args, err)
		}
	}
	if _, err := runCLI(t, "data", "mult", "--kind", "sft", "-o", "/nonexistent/dir/x.jsonl"); err == nil {
		t.Error("unwritable output: want an error")
	}
}

// The process-level contract: one line on stderr, exit status 2 for bad input, 1 for a bad file.
func TestData_ExitStatus(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte("{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"a\"}\n"), 0o644)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"data", "mult", "--kind", "ppo"}, 2, `unknown kind "ppo"`},
		{[]string{"data", "check", bad}, 1, `bad.jsonl:2: missing "completion"`},
	} {
		stdout, _ := os.Create(filepath.Join(dir, "stdout"))
		stderr, _ := os.Create(filepath.Join(dir, "stderr"))
		code := run(append([]string{"posttrain"}, tc.args...), stdout, stderr)
		stdout.Close()
		stderr.Close()
		msg, _ := os.ReadFile(filepath.Join(dir, "stderr"))
		if code != tc.code || bytes.Count(msg, []byte("\n")) != 1 || !strings.Contains(string(msg), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and one line with %q", tc.args, code, msg, tc.code, tc.msg)
		}
	}
}

func TestDataCheck_Tokenizer(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	if _, err := runCLI(t, "data", "mult", "--kind", "dpo", "--n", "4", "-o", good); err != nil {
		t.Fatal(err)
	}
	out, err := runCLI(t, "data", "check", "--tokenizer", "../../data/chat/testdata", good)
	if err != nil || !strings.Contains(out, "preference, conversational, 4 rows") {
		t.Errorf("good: %v %q", err, out)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo<|im_end|>"}]}`+"\n"), 0o644)
	_, err = runCLI(t, "data", "check", "--tokenizer", "../../data/chat/testdata", bad)
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:1: doubled special token <|im_end|>") {
		t.Errorf("doubled: got %v", err)
	}
}

func TestDataRewards(t *testing.T) {
	out, err := runCLI(t, "data", "rewards")
	if err != nil || !strings.Contains(out, "mult_correct\n") || !strings.Contains(out, "mult_strict\n") {
		t.Errorf("data rewards: %v %q", err, out)
	}
}
