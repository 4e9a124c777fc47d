package decoder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/safetensors"
)

// hfFixtures are the tiny checkpoints that transformers itself wrote (from_config, save_pretrained:
// scripts/reference/hf_families.py), one set per transformers version, with the log-probs, loss,
// gradient norms and generations of transformers' own forward (expected/*.float64.json).
var hfFixtures = []struct {
	dir, modelType string
	stored         string // the safetensors dtype
	tied           bool
	pad            int // pad_token_id, -1 for none
}{
	{"../testdata/hf-5.24.0/qwen2", "qwen2", "F32", false, 7},
	{"../testdata/hf-5.24.0/qwen3", "qwen3", "F32", true, 0},
	{"../testdata/hf-5.24.0/llama3", "llama", "F32", false, 3}, // rope_parameters llama3, biases
	{"../testdata/hf-5.24.0/smollm2", "llama", "BF16", true, 2},
	{"../testdata/hf-5.24.0/smollm3", "smollm3", "F32", true, 5},
	{"../testdata/hf-5.24.0/gemma3", "gemma3_text", "F32", true, 0}, // rope_parameters per layer type
	{"../testdata/hf-4.57.6/qwen2", "qwen2", "BF16", true, -1},
	{"../testdata/hf-4.57.6/qwen3", "qwen3", "BF16", false, 0},
	{"../testdata/hf-4.57.6/llama3", "llama", "BF16", true, 3}, // rope_scaling llama3
	{"../testdata/hf-4.57.6/smollm2", "llama", "F32", false, 2},
	{"../testdata/hf-4.57.6/smollm3", "smollm3", "BF16", false, 5},
	{"../testdata/hf-4.57.6/gemma3", "gemma3_text", "BF16", true, 0}, // rope_local_base_freq, no soft-capping
}

// hfName is a fixture's test name: its transformers version and family.
func hfName(dir string) string { return filepath.Base(filepath.Dir(dir)) + "/" + filepath.Base(dir) }

// hfReducedOffPureGo skips, on a backend other than pure Go, all but the transformers 5.24.0
// set's fixtures in families (every family when nil) and, when name is not empty, all but the
// left-padded batch: XLA compiles each graph for seconds (the whole matrix took 244 s on xla:cpu,
// 0.3 s on the pure-Go backend), and what the other cases add (the 4.57.6 config forms, the other
// batches) is read and laid out by host code that is the same on every backend.
func hfReducedOffPureGo(t *testing.T, dir, name string, families ...string) {
	t.Helper()
	b := backend.SharedForTests()
	if backend.IsPureGo(b) {
		return
	}
	set, family := filepath.Base(filepath.Dir(dir)), filepath.Base(dir)
	if set != "hf-5.24.0" || name != "" && name != "left_pad" || families != nil && !slices.Contains(families, family) {
		t.Skipf("on %q only the hf-5.24.0 set's %v, left_pad (hfReducedOffPureGo; all of them run on the pure-Go backend)", backend.ForTests(), families)
	}
}

// The config.json that transformers 4.57.6 or 5.24.0 wrote loads as that model (model_type, tied,
// stored dtype, padding row), and posttrain's float32 forward and gradients give transformers'
// float64 numbers: log-probs, loss and logits within 1e-5, every tensor's gradient L2 norm within
// 1e-4 relative (TestFamilies_MatchReference's tolerances), on left-padded, right-padded and
// single rows in which the pad token is also a real token.
func TestHFFamilies_MatchTransformers(t *testing.T) {
	for _, f := range hfFixtures {
		t.Run(hfName(f.dir), func(t *testing.T) {
			ctx, cfg := loadFixture(t, f.dir, dtypes.Float32)
			pad, ok := cfg.PaddingIdx()
			if !ok {
				pad = -1
			}
			if cfg.ModelType != f.modelType || cfg.TieWordEmbeddings != f.tied || pad != f.pad {
				t.Fatalf("config: model_type %q tied %v padding row %d, want %q %v %d", cfg.ModelType, cfg.TieWordEmbeddings, pad, f.modelType, f.tied, f.pad)
			}
			checkStoredDType(t, filepath.Join(f.dir, "model"), f.stored)
			for _, name := range fixtureCases {
				t.Run(name, func(t *testing.T) {
					hfReducedOffPureGo(t, f.dir, name)
					checkFixtureCase(t, ctx, cfg, f.dir, name)
				})
			}
		})
	}
}

// transformers' nn.Embedding(vocab, hidden, padding_idx=pad_token_id): the pad token's row of
// model.embed_tokens.weight gets no gradient from the lookup. Untied, its gradient is exactly 0
// although the pad token is an input of the batch; tied, the LM head's gradient for that row
// remains and equals transformers' (within 1e-4 relative).
func TestHFFamilies_PaddingIdxGradient(t *testing.T) {
	for _, f := range hfFixtures {
		if f.pad < 0 {
			continue
		}
		t.Run(hfName(f.dir), func(t *testing.T) {
			hfReducedOffPureGo(t, f.dir, "", "qwen2", "qwen3") // untied and tied
			ctx, cfg := loadFixture(t, f.dir, dtypes.Float32)
			b := readInputIn(t, f.dir, "left_pad")
			if !slices.ContainsFunc(b.IDs, func(row []int32) bool { return slices.Contains(row, int32(f.pad)) }) {
				t.Fatalf("the batch lacks the pad token %d", f.pad)
			}
			want := readExpectedIn(t, f.dir, "left_pad", "float64").Grad.PadRowL2
			if want == nil {
				t.Fatal("expected file has no grad.pad_row_l2")
			}
			got := padRowGradL2(t, ctx, cfg, b, f.pad)
			if f.tied && !near(got, *want, 1e-4**want) || !f.tied && (got != 0 || *want != 0) {
				t.Errorf("‖∂loss/∂embed_tokens[%d]‖ = %.7g, transformers %.7g", f.pad, got, *want)
			}
			t.Logf("pad row %d gradient L2 %.7g (transformers %.7g)", f.pad, got, *want)
		})
	}
}

// padRowGradL2 is the L2 norm of the loss's gradient with respect to row pad of
// model.embed_tokens.weight.
func padRowGradL2(t *testing.T, ctx *context.Context, cfg *Config, b *Batch, pad int) float64 {
	t.Helper()
	exec, err := context.NewExec(backend.SharedForTests(), ctx, func(ctx *context.Context, ids, pos, mask, scored *Node) *Node {
		loss := MeanNLL(TokenLogProbs(ctx, cfg, ids, pos, mask), scored)
		names, grads := Gradients(ctx, loss)
		i := slices.Index(names, "model.embed_tokens.weight")
		if i < 0 {
			panic("no gradient for model.embed_tokens.weight")
		}
		row := Slice(grads[i], AxisElem(pad)) // [1,D]
		return Sqrt(ReduceAllSum(Square(ConvertDType(row, dtypes.Float64))))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec(batchTensors(b)...)
	if err != nil {
		t.Fatal(err)
	}
	return out[0].Value().(float64)
}

// checkStoredDType checks that every tensor of the checkpoint in dir is stored as dtype.
func checkStoredDType(t *testing.T, dir, dtype string) {
	t.Helper()
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for name, tensor := range stored {
		if got := tensor.DType; got != dtype {
			t.Fatalf("%s stored %s, want %s", name, got, dtype)
		}
	}
}

// hfConfigFields reads the keys of a fixture's config.json.
func hfConfigFields(t *testing.T, dir string) map[string]json.RawMessage {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "model", ConfigFileName))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Each set's config.json is in its version's form, so that the loader is tested on both:
// transformers 5.24.0 writes rope_parameters (Gemma 3: one per layer type) and no rope_theta or
// rope_scaling; 4.57.6 writes rope_theta and rope_scaling (Gemma 3: rope_local_base_freq too).
// Both write dtype, not torch_dtype.
func TestHFFamilies_ConfigForms(t *testing.T) {
	for _, f := range hfFixtures {
		m := hfConfigFields(t, f.dir)
		v5 := filepath.Base(filepath.Dir(f.dir)) == "hf-5.24.0"
		_, params := m["rope_parameters"]
		_, theta := m["rope_theta"]
		_, dtype := m["dtype"]
		_, torchDType := m["torch_dtype"]
		if params != v5 || theta == v5 || !dtype || torchDType {
			t.Errorf("%s: rope_parameters %v, rope_theta %v, dtype %v, torch_dtype %v", hfName(f.dir), params, theta, dtype, torchDType)
		}
	}
}
