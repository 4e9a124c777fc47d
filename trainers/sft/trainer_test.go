package sft_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/sft"
)

// SFT on the course's multiplication rows lowers the NLL of held-out rows' completions, logs
// TRL's SFT metrics every step, and leaves a loadable model in OUTPUT_DIR.
func TestSFT_LowersHeldOutNLL(t *testing.T) {
	dir := looptest.Model(t)
	m := looptest.Load(t, dir, false)
	b := looptest.Backend(t)
	cfg := sft.DefaultConfig()
	looptest.Common(t, &cfg.Training, 1e-2, 8, 1, 12)
	train, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 48, 1)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	held, err := sft.New(m, looptest.Read(t, looptest.MultFile(t, mult.SFT, 16, 2)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	before, err := held.NLL(b, 16)
	if err != nil {
		t.Fatal(err)
	}
	res, err := loop.Run(context.Background(), m, train, loop.Options{Config: cfg, Backend: b})
	if err != nil {
		t.Fatal(err)
	}
	after, err := held.NLL(b, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("held-out NLL %.4f → %.4f (ln V = %.4f); last line %v", before, after, math.Log(512), res.Last)
	if !(after < before-1) {
		t.Errorf("held-out NLL %.4f → %.4f: want a drop of more than 1 nat", before, after)
	}
	recs, err := runlog.ReadMetrics(filepath.Join(cfg.OutputDir, runlog.MetricsName))
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 12 {
		t.Fatalf("%d metrics lines, want 12", len(recs))
	}
	for _, k := range []string{"loss", "grad_norm", "learning_rate", "mean_token_accuracy", "entropy", "num_tokens"} {
		if _, ok := recs[0].Metrics[k]; !ok {
			t.Errorf("metrics line lacks %q: %v", k, recs[0])
		}
	}
	for _, name := range []string{"config.json", "model.safetensors", "tokenizer.json", "training_args.yaml", "checkpoint-12/trainer_state.json", "checkpoint-12/optimizer.safetensors"} {
		if _, err := os.Stat(filepath.Join(cfg.OutputDir, name)); err != nil {
			t.Errorf("output: %v", err)
		}
	}
	reloaded := looptest.Load(t, cfg.OutputDir, false)
	again, err := sft.New(reloaded, looptest.Read(t, looptest.MultFile(t, mult.SFT, 16, 2)), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.NLL(b, 16); err != nil || got != after {
		t.Errorf("NLL of the saved model = %v (err %v), want %v", got, err, after)
	}
}

// A malformed row is an error naming the file and line.
func TestSFT_MalformedRowNamesLine(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	path := filepath.Join(t.TempDir(), "bad.jsonl")
	rows := `{"prompt": "2×3=", "completion": "6"}` + "\n" + `{"prompt": "2×4=", "completion": 8}` + "\n"
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := looptest.ReadErr(path)
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Fatalf("error %v, want one naming bad.jsonl:2", err)
	}
	// A row the trainer cannot use (doubled end-of-turn token) names its line too.
	rows = `{"prompt": "2×3=", "completion": "6"}` + "\n" + `{"prompt": "2×4=", "completion": "8<|im_end|>\n<|im_end|>"}` + "\n"
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = sft.New(m, looptest.Read(t, path), sft.DefaultConfig())
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Fatalf("error %v, want one naming bad.jsonl:2", err)
	}
}

// Which tokens SFT scores, as TRL: the completion of prompt-completion rows (EOS appended to
// standard ones; the chat template's "<|im_end|>\n" closes conversational ones), every token of
// "text" rows, the assistant turns' content and end-of-turn token of "messages" rows by default,
// and every token of "messages" rows with assistant_only_loss=false (TRL's default).
func TestSFT_ScoredTokens(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	dir := t.TempDir()
	write := func(name, rows string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	messages := `{"messages": [{"role": "user", "content": "2×3?"}, {"role": "assistant", "content": "6"}]}` + "\n"
	yes, no := true, false
	cases := []struct {
		name, rows    string
		assistantOnly *bool // nil: the default
		want          func(tokens int) int
	}{
		{"standard prompt-completion", `{"prompt": "2×3=", "completion": "6"}` + "\n", nil, func(int) int { return 2 }}, // 6 <|im_end|>
		{"conversational prompt-completion", `{"prompt": [{"role": "user", "content": "2×3?"}], "completion": [{"role": "assistant", "content": "6"}]}` + "\n", nil,
			func(int) int { return 3 }}, // 6 <|im_end|> \n
		{"text, all tokens", `{"text": "2×3=6"}` + "\n", nil, func(n int) int { return n - 1 }},
		{"messages, all tokens", messages, &no, func(n int) int { return n - 1 }},
		{"messages, assistant only by default", messages, nil, func(int) int { return 2 }}, // 6 <|im_end|>
		{"messages, assistant only", messages, &yes, func(int) int { return 2 }},
	}
	for i, c := range cases {
		cfg := sft.DefaultConfig()
		cfg.AssistantOnlyLoss = c.assistantOnly
		tr, err := sft.New(m, looptest.Read(t, write(fmt.Sprintf("%d.jsonl", i), c.rows)), cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got, want := tr.Units(0), float64(c.want(tr.Tokens(0))); got != want {
			t.Errorf("%s: %v scored tokens of %d, want %v", c.name, got, tr.Tokens(0), want)
		}
	}
}
