package sft_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// A dataset in which no row has a token to train on is an error before training, naming the first
// such row, the count and the cause: no assistant turn, or every scored token cut away by
// max_length. (TRL trains on it: loss 0, or NaN from 0/0.)
func TestSFT_NoScoredTokenIsAnError(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	dir := t.TempDir()
	user := `{"messages": [{"role": "user", "content": "2×3?"}]}` + "\n"
	chat := `{"messages": [{"role": "user", "content": "what is 2×3? please answer"}, {"role": "assistant", "content": "6"}]}` + "\n"
	pc := `{"prompt": "what is 2×3? please answer", "completion": "6"}` + "\n"
	cases := []struct {
		name, rows string
		maxLength  int
		want       string
	}{
		{"no assistant turn", user + user, 0, "rows.jsonl:1: none of the 2 rows has a token to train on (a scored token): 2 have none (no assistant turn"},
		{"assistant turn cut by max_length", chat + chat + chat, 4, "none of the 3 rows has a token to train on (a scored token): 3 lose all their scored tokens to max_length 4"},
		{"completion cut by max_length", pc, 3, "none of the 1 rows has a token to train on (a scored token): 1 lose all their scored tokens to max_length 3"},
	}
	for _, c := range cases {
		path := filepath.Join(dir, "rows.jsonl")
		if err := os.WriteFile(path, []byte(c.rows), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := sft.DefaultConfig()
		if c.maxLength > 0 {
			cfg.MaxLength = c.maxLength
		}
		_, err := sft.New(m, looptest.Read(t, path), cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line with %q", c.name, err, c.want)
		}
	}
}

// When only some rows have no token to train on, training goes on (TRL drops nothing) with one
// warning naming their count and the first one's line; a step whose accumulated batch holds only
// such rows warns, naming the step, instead of logging loss 0 in silence.
func TestSFT_SomeUnscoredRowsWarn(t *testing.T) {
	dir := looptest.Model(t)
	m := looptest.Load(t, dir, false)
	path := filepath.Join(t.TempDir(), "rows.jsonl")
	rows := `{"messages": [{"role": "user", "content": "2×3?"}, {"role": "assistant", "content": "6"}]}` + "\n" +
		`{"messages": [{"role": "user", "content": "2×4?"}]}` + "\n"
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-3, 1, 1, 2) // one row per step: one of the two steps has nothing to train on
	tr, err := sft.New(m, looptest.Read(t, path), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := loop.Run(context.Background(), m, tr, loop.Options{Config: cfg, Backend: looptest.Backend(t), Logger: logger}); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	for _, want := range []string{"rows.jsonl:2: 1 of the 2 rows have no token to train on", "1 have none (no assistant turn", "no row of the accumulated batch has a token to train on"} {
		if strings.Count(out, want) != 1 {
			t.Errorf("log %q: want %q once", out, want)
		}
	}
}
