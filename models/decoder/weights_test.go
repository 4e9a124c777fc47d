package decoder

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/safetensors"
)

func TestVarScope_RoundTrip(t *testing.T) {
	scope, name := VarScope("model.layers.0.self_attn.q_proj.weight")
	if scope != "/model/layers/0/self_attn/q_proj" || name != "weight" {
		t.Fatalf("got %q %q", scope, name)
	}
	if got := HFName(scope, name); got != "model.layers.0.self_attn.q_proj.weight" {
		t.Fatalf("HFName: got %q", got)
	}
}

func readTinyTensors(t *testing.T) map[string]*safetensors.Tensor {
	t.Helper()
	stored, err := safetensors.ReadModelDir(filepath.Join(tinyDir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	return stored
}

func TestSetWeights_Errors(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	_ = ctx
	for _, c := range []struct {
		name   string
		modify func(map[string]*safetensors.Tensor)
		want   string
	}{
		{"missing", func(m map[string]*safetensors.Tensor) { delete(m, "model.layers.1.mlp.up_proj.weight") },
			`tensor "model.layers.1.mlp.up_proj.weight" is missing`},
		{"unexpected", func(m map[string]*safetensors.Tensor) {
			m["model.layers.2.mlp.up_proj.weight"] = m["model.layers.1.mlp.up_proj.weight"]
		}, `unexpected tensors ["model.layers.2.mlp.up_proj.weight"]`},
		{"wrong shape", func(m map[string]*safetensors.Tensor) {
			w := *m["model.norm.weight"]
			w.Shape = []int{8, 8}
			m["model.norm.weight"] = &w
		}, `tensor "model.norm.weight" has shape [8 8], config.json implies [64]`},
	} {
		stored := readTinyTensors(t)
		c.modify(stored)
		err := SetWeights(context.New(), cfg, stored, dtypes.Float32, "dir/model.safetensors")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "dir/model.safetensors") {
			t.Errorf("%s: want an error naming the file and %s, got %v", c.name, c.want, err)
		}
	}
}

// A tied checkpoint may carry lm_head.weight and rotary buffers; both are ignored.
func TestSetWeights_IgnoresTiedHeadCopy(t *testing.T) {
	_, cfg := loadTiny(t, dtypes.Float32)
	stored := readTinyTensors(t)
	stored["lm_head.weight"] = stored["model.embed_tokens.weight"]
	stored["model.layers.0.self_attn.rotary_emb.inv_freq"] = &safetensors.Tensor{Name: "x", DType: "F32", Shape: []int{1}, Data: make([]byte, 4)}
	if err := SetWeights(context.New(), cfg, stored, dtypes.Float32, "m"); err != nil {
		t.Fatal(err)
	}
}

func TestExportWeights_RoundTripIsExact(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	out, err := ExportWeights(ctx, cfg, "F32")
	if err != nil {
		t.Fatal(err)
	}
	stored := readTinyTensors(t)
	if len(out) != len(stored) {
		t.Fatalf("%d tensors exported, %d stored", len(out), len(stored))
	}
	for i, o := range out {
		if o.Name != cfg.Tensors()[i].Name {
			t.Fatalf("tensor %d is %q, want HF order %q", i, o.Name, cfg.Tensors()[i].Name)
		}
		s := stored[o.Name]
		if !slices.Equal(o.Shape, s.Shape) || !bytes.Equal(o.Data, s.Data) {
			t.Errorf("%s: exported tensor differs from the stored one", o.Name)
		}
	}
}

// writeConverted writes the tiny checkpoint with its weights stored as dtype (BF16 or F16).
func writeConverted(t *testing.T, dtype string) string {
	t.Helper()
	ctx, cfg := loadTiny(t, dtypes.Float32)
	out, err := ExportWeights(ctx, cfg, dtype)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := safetensors.WriteFile(filepath.Join(dir, safetensors.SingleFileName), out, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Weights stored as BF16/F16 load and run. The checks are loose because the weights themselves are
// rounded (bf16 keeps 8 significant bits, about 0.4% relative error; f16 11 bits) and, with
// bfloat16 compute, every activation is rounded too: the float64 reference uses the f32 weights.
func TestLowPrecisionWeights_LoadAndRun(t *testing.T) {
	_, cfg := loadTiny(t, dtypes.Float32)
	want := readExpected(t, "left_pad", "float64")
	b := readInput(t, "left_pad")
	for _, c := range []struct {
		stored  string
		compute dtypes.DType
		tol     float64
	}{
		{"F16", dtypes.Float32, 0.01},
		{"BF16", dtypes.Float32, 0.05},
		{"BF16", dtypes.BFloat16, 0.15},
		{"F32", dtypes.BFloat16, 0.15},
	} {
		dir := filepath.Join(tinyDir, "model")
		if c.stored != "F32" {
			dir = writeConverted(t, c.stored)
		}
		ctx := context.New()
		if err := LoadWeights(ctx, cfg, dir, c.compute); err != nil {
			t.Fatalf("%s stored, %s compute: %v", c.stored, c.compute, err)
		}
		if v := ctx.GetVariableByScopeAndName("/model/norm", "weight"); v.DType() != c.compute {
			t.Errorf("%s stored, %s compute: variables are %s", c.stored, c.compute, v.DType())
		}
		if c.stored == "BF16" && c.compute == dtypes.BFloat16 {
			checkBitsKept(t, ctx, cfg, dir)
		}
		got := score(t, ctx, cfg, b, true)
		if !near(got.Loss, want.Loss, c.tol) || !near(got.Grad.GlobalL2, want.Grad.GlobalL2, 20*c.tol) {
			t.Errorf("%s stored, %s compute: loss %.5f (want %.5f ± %g), grad norm %.4f (want %.4f)", c.stored, c.compute,
				got.Loss, want.Loss, c.tol, got.Grad.GlobalL2, want.Grad.GlobalL2)
		}
		t.Logf("%s stored, %s compute: loss %.6f (reference %.6f), max log-prob error %.2g", c.stored, c.compute, got.Loss, want.Loss,
			maxDiff(got.TokenLogProbs, want.TokenLogProbs))
	}
}

// checkBitsKept checks that bf16 weights loaded for bf16 compute are the stored bits.
func checkBitsKept(t *testing.T, ctx *context.Context, cfg *Config, dir string) {
	t.Helper()
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ExportWeights(ctx, cfg, "BF16")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range out {
		if !bytes.Equal(o.Data, stored[o.Name].Data) {
			t.Errorf("%s: bf16 weights changed on load", o.Name)
		}
	}
}

// An untied checkpoint whose lm_head.weight equals the embeddings scores like the tied one.
func TestUntiedHead_SameAsTied(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	b := readInput(t, "right_pad")
	tied := score(t, ctx, cfg, b, false)
	untiedCfg := *cfg
	untiedCfg.TieWordEmbeddings = false
	stored := readTinyTensors(t)
	head := *stored["model.embed_tokens.weight"]
	head.Name = "lm_head.weight"
	stored["lm_head.weight"] = &head
	untiedCtx := context.New()
	if err := SetWeights(untiedCtx, &untiedCfg, stored, dtypes.Float32, "m"); err != nil {
		t.Fatal(err)
	}
	untied := score(t, untiedCtx, &untiedCfg, b, true)
	if d := maxDiff(untied.TokenLogProbs, tied.TokenLogProbs); d > 1e-6 {
		t.Errorf("untied vs tied log-probs differ by %g", d)
	}
	if _, ok := untied.Grad.L2["lm_head.weight"]; !ok || len(untied.Grad.L2) != len(untiedCfg.Tensors()) {
		t.Errorf("untied gradients: %v", untied.Grad.L2)
	}
}

func TestScore_BadBatchIsAnError(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	_, err := Score(backend.SharedForTests(), ctx, cfg, &Batch{IDs: [][]int32{{1, 5000}}, Mask: [][]int32{{1, 1}}}, false)
	if err == nil || !strings.Contains(err.Error(), "outside the vocabulary") {
		t.Fatalf("want a vocabulary error, got %v", err)
	}
}

// Rows longer than the model's positions, and completion starts outside the row, are refused before
// any graph is built (40,000 tokens used to run out of memory; −1 or past the row scored silently).
func TestScore_LengthAndCompletionStartChecked(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	row := func(n int) ([][]int32, [][]int32) {
		ids, mask := make([]int32, n), make([]int32, n)
		for i := range mask {
			ids[i], mask[i] = 1, 1
		}
		return [][]int32{ids}, [][]int32{mask}
	}
	ids, mask := row(cfg.MaxPositionEmbeddings + 1)
	if _, err := Score(backend.SharedForTests(), ctx, cfg, &Batch{IDs: ids, Mask: mask}, false); err == nil || !strings.Contains(err.Error(), "max_position_embeddings") {
		t.Errorf("a row past max_position_embeddings: %v", err)
	}
	ids, mask = row(4)
	for _, cs := range []int{-1, 4, 9} {
		_, err := Score(backend.SharedForTests(), ctx, cfg, &Batch{IDs: ids, Mask: mask, CompletionStart: []int{cs}}, false)
		if err == nil || !strings.Contains(err.Error(), "completion_start") {
			t.Errorf("completion_start %d: %v", cs, err)
		}
	}
	for _, n := range []string{"-3", "-1", "16777217", "2147483648", "9223372036854775807"} {
		if _, _, err := ParseBatchJSON([]byte(`{"input_ids": [[1, 2]], "max_new_tokens": ` + n + `}`)); err == nil || !strings.Contains(err.Error(), "max_new_tokens") {
			t.Errorf("max_new_tokens %s: %v", n, err)
		}
	}
}
