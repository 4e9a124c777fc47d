package qwen2

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

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
	g := generate.NewGenerator(testBackendOrSkip(t), ctx, Arch{Config: cfg2})
	defer g.Finalize()
	if _, err := g.Generate([][]int32{{1, 2}}, generate.Options{MaxNewTokens: 2}); err != nil {
		t.Fatal(err)
	}
}
