package decoder

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/models/safetensors"
)

func TestPreset_Shapes(t *testing.T) {
	big, err := Preset("qwen2.5-0.5b")
	if err != nil {
		t.Fatal(err)
	}
	if got := big.NumParameters(); got != 494_032_768 {
		t.Errorf("qwen2.5-0.5b: %d parameters, want 494,032,768 (Qwen2.5-0.5B)", got)
	}
	// The released models' parameter counts (their model cards: 1.54B, 7.61B, 8.03B).
	for name, want := range map[string]int{"qwen2.5-1.5b": 1_543_714_304, "qwen2.5-7b": 7_615_616_512, "llama-3.1-8b": 8_030_261_248} {
		cfg, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.NumParameters(); got != want {
			t.Errorf("%s: %d parameters, want %d", name, got, want)
		}
	}
	tiny, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := ReadConfig(filepath.Join(tinyDir, "model"))
	if err != nil {
		t.Fatal(err)
	}
	tiny.RopeScaling = fixture.RopeScaling
	if tiny.NumParameters() != fixture.NumParameters() || tiny.HeadDim != fixture.HeadDim || *tiny.BOSTokenID != *fixture.BOSTokenID {
		t.Errorf("tiny preset %+v differs from the fixture %+v", tiny, fixture)
	}
	if _, err := Preset("qwen3"); err == nil || !strings.Contains(err.Error(), "valid: tiny, qwen2.5-0.5b") {
		t.Errorf("unknown preset: %v", err)
	}
}

// InitTensors draws what InitWeights draws, with HF's init statistics.
func TestInitTensors_MatchesInitWeights(t *testing.T) {
	cfg, _ := Preset("tiny")
	ctx := context.New()
	if err := InitWeights(ctx, cfg, 3, dtypes.Float32); err != nil {
		t.Fatal(err)
	}
	want, err := ExportWeights(ctx, cfg, "F32")
	if err != nil {
		t.Fatal(err)
	}
	got, err := InitTensors(cfg, 3, "F32")
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i].Name != want[i].Name || !bytes.Equal(got[i].Data, want[i].Data) {
			t.Errorf("tensor %s differs from InitWeights'", want[i].Name)
		}
	}
	other, _ := InitTensors(cfg, 4, "F32")
	if bytes.Equal(other[0].Data, got[0].Data) {
		t.Error("seeds 3 and 4 drew the same embedding")
	}
	for _, ts := range got {
		x, _ := ts.Float64s()
		mean, sq := 0.0, 0.0
		for _, v := range x {
			mean += v
			sq += v * v
		}
		mean /= float64(len(x))
		std := math.Sqrt(sq/float64(len(x)) - mean*mean)
		switch {
		case strings.HasSuffix(ts.Name, "norm.weight"):
			if mean != 1 || std != 0 {
				t.Errorf("%s: mean %v std %v, want ones", ts.Name, mean, std)
			}
		case strings.HasSuffix(ts.Name, ".bias"):
			if sq != 0 {
				t.Errorf("%s: want zeros", ts.Name)
			}
		case len(x) >= 10000 && (math.Abs(std-0.02) > 0.001 || math.Abs(mean) > 0.001):
			t.Errorf("%s: mean %v std %v, want N(0, 0.02²)", ts.Name, mean, std)
		}
	}
}

func TestInitCheckpoint_Loads(t *testing.T) {
	cfg, _ := Preset("tiny")
	dir := filepath.Join(t.TempDir(), "init")
	if err := InitCheckpoint(dir, cfg, 1, SaveOptions{DType: "BF16"}); err != nil {
		t.Fatal(err)
	}
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st := stored["model.layers.0.mlp.up_proj.weight"]; st.DType != "BF16" {
		t.Errorf("stored as %s, want BF16", st.DType)
	}
	ctx, cfg2, err := Load(dir, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if cfg2.TorchDType != "bfloat16" || cfg2.VocabSize != 1024 {
		t.Errorf("config %+v", cfg2)
	}
	g := generate.NewGenerator(backend.SharedForTests(), ctx, Arch{Config: cfg2})
	defer g.Finalize()
	if _, err := g.Generate([][]int32{{1, 2}}, generate.Options{MaxNewTokens: 2}); err != nil {
		t.Fatal(err)
	}
}

// The real shapes' configs (never allocated here): parameter counts from the released configs,
// worked out by hand — Qwen3-0.6B 596,049,920 (0.44B without the embedding, as its model card
// says), Llama-3.2-1B 1,235,814,400, SmolLM2-135M 134,515,008, SmolLM3-3B 3,075,098,624 (36 layers
// of 78,123,008 plus the tied 128256×2048 embedding and the final norm) — and the family features.
func TestPreset_RealFamilyShapes(t *testing.T) {
	for _, c := range []struct {
		name, modelType string
		params          int64
		headDim         int
		rope            string
	}{
		{"qwen3-0.6b", "qwen3", 596_049_920, 128, ""},
		{"llama-3.2-1b", "llama", 1_235_814_400, 64, "llama3"},
		{"smollm2-135m", "llama", 134_515_008, 64, ""},
		{"gemma-3-270m", "gemma3_text", 268_098_176, 256, ""},
		{"smollm3-3b", "smollm3", 3_075_098_624, 128, ""},
	} {
		cfg, err := Preset(c.name)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !RealPreset(c.name) || cfg.ModelType != c.modelType || int64(cfg.NumParameters()) != c.params ||
			cfg.HeadDim != c.headDim || cfg.Rope.Type != c.rope || !cfg.TieWordEmbeddings || cfg.AttentionBias || cfg.MLPBias {
			t.Errorf("%s: %+v (%d parameters), want model_type %s, %d parameters, head_dim %d, rope %q, tied, no biases",
				c.name, cfg, cfg.NumParameters(), c.modelType, c.params, c.headDim, c.rope)
		}
	}
}

// Each tiny family preset initialises, loads back with its family's config and runs a forward
// pass (greedy generation).
func TestPreset_TinyFamiliesInitAndLoad(t *testing.T) {
	backend := backend.SharedForTests()
	for _, name := range []string{"qwen3-tiny", "llama-3.2-tiny", "smollm2-tiny", "smollm3-tiny", "gemma-3-tiny"} {
		cfg, err := Preset(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if RealPreset(name) {
			t.Errorf("%s counted as a real shape", name)
		}
		dir := filepath.Join(t.TempDir(), name)
		if err := InitCheckpoint(dir, cfg, 1, SaveOptions{DType: "F32"}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ctx, got, err := Load(dir, dtypes.Float32)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.ModelType != cfg.ModelType || got.HeadDim != cfg.HeadDim || got.Rope != cfg.Rope || got.RopeTheta != cfg.RopeTheta ||
			got.NumParameters() != cfg.NumParameters() || got.InitializerRange != cfg.InitializerRange ||
			!slices.Equal(got.NoRopeLayers, cfg.NoRopeLayers) {
			t.Errorf("%s: loaded %+v, want %+v", name, got, cfg)
		}
		g := generate.NewGenerator(backend, ctx, Arch{Config: got})
		out, err := g.Generate([][]int32{{1, 2, 3}}, generate.Options{MaxNewTokens: 2})
		g.Finalize()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(out) != 1 {
			t.Errorf("%s: %d rows generated, want 1", name, len(out))
		}
	}
}
