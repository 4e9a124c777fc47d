package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// One SFT step of the released SmolLM2-135M-Instruct (a full fine-tune, 4 rows in one
// micro-batch) logs the same loss, entropy and grad_norm on the pure-Go backend as on xla:cpu,
// within 1e-5 relative, and the same loss and gradient norm as a float64 computation: the model
// loaded in float64 scoring the same tokens (decoder.Score's mean NLL over the completion tokens
// and the root sum of its per-tensor gradient norms, which is what SFT's loss and grad_norm are
// for one micro-batch). These are long sums: the Σ exp over 49,152 logits at every token, and
// Σ g² over 135M gradient elements, which the pure-Go backend read 2.6e-4 low before
// third_party/patches/gomlx-v0.26.0-float-sums.patch (docs/numerics.md). Needs xla:cpu's plugin.
func TestRealModels_Numerics(t *testing.T) {
	if os.Getenv(realTrainEnv) == "" {
		t.Skipf("set %s=1 (make test-real) to run the released model; it takes minutes", realTrainEnv)
	}
	model := realCheckpoint(t, "SmolLM2-135M-Instruct.Q4_1")
	dir := t.TempDir()
	rows := standardMult(t, dir, "sft")
	metrics := map[string]map[string]float64{}
	for _, b := range []string{"go", "xla:cpu"} {
		out := filepath.Join(dir, "sft-"+b[:2])
		if _, err := runCLI(t, "sft", "--model", model, "--dataset", rows, "--output-dir", out, "--backend", b,
			"--max-steps", "1", "--logging-steps", "1", "--per-device-train-batch-size", "4",
			"--learning-rate", "1e-5", "--seed", "3"); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		recs := metricsLines(t, out)
		if len(recs) != 1 {
			t.Fatalf("%s: %d metrics lines, want 1", b, len(recs))
		}
		metrics[b] = recs[0].Metrics
	}
	rel := func(a, b float64) float64 { return math.Abs(a-b) / math.Max(math.Abs(b), 1e-300) }
	for _, k := range []string{"loss", "entropy", "grad_norm"} {
		g, x := metrics["go"][k], metrics["xla:cpu"][k]
		t.Logf("%s: go %.9g, xla:cpu %.9g, relative difference %.2g", k, g, x, rel(g, x))
		if !(rel(g, x) <= 1e-5) {
			t.Errorf("%s: go %.9g, xla:cpu %.9g: relative difference %.2g > 1e-5", k, g, x, rel(g, x))
		}
	}

	// The float64 computation on the same tokens: the rows as SFT encodes them (standard data:
	// the tokenizer's EOS ends each completion), right-padded.
	txt, err := encode.Load(model, encode.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.ReadFile(rows)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(f))
	var encoded []encode.Encoded
	for dec.More() {
		var r struct{ Prompt, Completion string }
		if err := dec.Decode(&r); err != nil {
			t.Fatal(err)
		}
		e, err := txt.EncodePair(r.Prompt, r.Completion, true, encode.Truncation{})
		if err != nil {
			t.Fatal(err)
		}
		encoded = append(encoded, e)
	}
	padded := trainable.EncodedRows(encoded) // SFT's layout: right-padded, id 0
	batch := decoder.Batch{IDs: padded.IDs, Mask: padded.Mask}
	for _, e := range encoded {
		batch.CompletionStart = append(batch.CompletionStart, e.Start)
	}
	ctx64, cfg, err := decoder.Load(model, dtypes.Float64)
	if err != nil {
		t.Fatal(err)
	}
	b, err := backend.New("xla:cpu")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	res, err := decoder.Score(b, ctx64, cfg, &batch, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f64  float64
	}{{"loss", res.Loss}, {"grad_norm", res.GlobalL2}} {
		for _, be := range []string{"go", "xla:cpu"} {
			v := metrics[be][c.name]
			t.Logf("%s: %s %.9g, float64 %.12g, relative difference %.2g", c.name, be, v, c.f64, rel(v, c.f64))
			if !(rel(v, c.f64) <= 1e-5) {
				t.Errorf("%s on %s: %.9g, float64 %.12g: relative difference %.2g > 1e-5", c.name, be, v, c.f64, rel(v, c.f64))
			}
		}
	}
}
