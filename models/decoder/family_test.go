package decoder

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/safetensors"
)

// familyFixtures are the tiny random checkpoints of the other families, written by
// scripts/reference/tiny_checkpoints.py, with the expected outputs of scripts/reference/qwen2.py
// (a plain-PyTorch coding of modeling_qwen3.py, modeling_llama.py and modeling_gemma3.py) in
// float64.
var familyFixtures = []struct {
	dir, modelType string
	stored         string // the safetensors dtype
	tied           bool
}{
	{"../testdata/qwen3-tiny", "qwen3", "F32", true},              // q_norm/k_norm, head_dim 32 ≠ 64/4
	{"../testdata/llama-tiny", "llama", "F32", false},             // llama3 RoPE scaling, attention and MLP biases
	{"../testdata/smollm2-tiny", "llama", "BF16", true},           // SmolLM2's form, stored bfloat16
	{"../testdata/smollm3-tiny", "smollm3", "F32", true},          // NoPE layers 1 and 3, MLP biases
	{"../testdata/gemma3-tiny", "gemma3_text", "F32", true},       // Gemma 3: window 4, local RoPE base, linear RoPE, softcap
	{"../testdata/gemma3-bf16-tiny", "gemma3_text", "BF16", true}, // Gemma 3 1B's config form (sliding_window_pattern), bfloat16
}

// Per-token log-probs within 1e-5 of the float64 reference, gradient norms within 1e-4
// (relative), the same scored tokens and last-position argmax, on left- and right-padded batches.
func TestFamilies_MatchReference(t *testing.T) {
	for _, f := range familyFixtures {
		t.Run(filepath.Base(f.dir), func(t *testing.T) {
			ctx, cfg := loadFixture(t, f.dir, dtypes.Float32)
			if cfg.ModelType != f.modelType || cfg.TieWordEmbeddings != f.tied {
				t.Fatalf("config: model_type %q tied %v, want %q %v", cfg.ModelType, cfg.TieWordEmbeddings, f.modelType, f.tied)
			}
			for _, name := range fixtureCases {
				t.Run(name, func(t *testing.T) { checkFixtureCase(t, ctx, cfg, f.dir, name) })
			}
		})
	}
}

// The rows of the left- and right-padded batches give the same log-probs in every family.
func TestFamilies_PaddingInvariance(t *testing.T) {
	for _, f := range familyFixtures {
		t.Run(filepath.Base(f.dir), func(t *testing.T) {
			ctx, cfg := loadFixture(t, f.dir, dtypes.Float32)
			left := score(t, ctx, cfg, readInputIn(t, f.dir, "left_pad"), false)
			right := score(t, ctx, cfg, readInputIn(t, f.dir, "right_pad"), false)
			if d := maxDiff(left.TokenLogProbs, right.TokenLogProbs); d > 2e-6 {
				t.Errorf("left vs right padding: log-probs differ by %g", d)
			}
		})
	}
}

// Save keeps the family's config (model_type, its fields) and Load gives back the same model.
func TestFamilies_SaveLoadRoundTrip(t *testing.T) {
	for _, f := range familyFixtures {
		t.Run(filepath.Base(f.dir), func(t *testing.T) {
			ctx, cfg := loadFixture(t, f.dir, dtypes.Float32)
			dir := filepath.Join(t.TempDir(), "ckpt")
			if err := Save(dir, ctx, cfg, SaveOptions{DType: cfg.TorchDType}); err != nil {
				t.Fatal(err)
			}
			ctx2, cfg2, err := Load(dir, dtypes.Float32)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg, cfg2) {
				t.Errorf("config: saved %+v, loaded %+v", cfg, cfg2)
			}
			var conf struct {
				Architectures []string `json:"architectures"`
			}
			data, _ := os.ReadFile(filepath.Join(dir, ConfigFileName))
			if err := json.Unmarshal(data, &conf); err != nil || !slices.Equal(conf.Architectures, []string{Families[f.modelType].Architecture}) {
				t.Errorf("config.json architectures %v (%v), want [%s]", conf.Architectures, err, Families[f.modelType].Architecture)
			}
			b := readInputIn(t, f.dir, "left_pad")
			want, got := score(t, ctx, cfg, b, false), score(t, ctx2, cfg2, b, false)
			if !slices.EqualFunc(got.TokenLogProbs, want.TokenLogProbs, slices.Equal) {
				t.Errorf("log-probs after save/load differ")
			}
		})
	}
}

// The llama-tiny fixture tells llama3 RoPE scaling apart from the default RoPE: without the
// scaling the log-probs move by 2.6e-3 (measured), far beyond the 1e-5 the match allows.
func TestFamilies_Llama3ScalingMatters(t *testing.T) {
	const dir = "../testdata/llama-tiny"
	ctx, cfg := loadFixture(t, dir, dtypes.Float32)
	if cfg.Rope.Type != "llama3" {
		t.Fatalf("fixture rope %+v, want llama3", cfg.Rope)
	}
	cfg.Rope = Rope{}
	got := score(t, ctx, cfg, readInputIn(t, dir, "left_pad"), false)
	if d := maxDiff(got.TokenLogProbs, readExpectedIn(t, dir, "left_pad", "float64").TokenLogProbs); d < 1e-3 {
		t.Errorf("without llama3 scaling the log-probs differ by only %g", d)
	}
}

// With bfloat16 compute every family runs close to the float64 reference (loose, as
// TestLowPrecisionWeights_LoadAndRun explains), and bfloat16-stored weights keep their bits.
func TestFamilies_BFloat16Compute(t *testing.T) {
	for _, f := range familyFixtures {
		t.Run(filepath.Base(f.dir), func(t *testing.T) {
			ctx, cfg := loadFixture(t, f.dir, dtypes.BFloat16)
			if f.stored == "BF16" {
				checkBitsKept(t, ctx, cfg, filepath.Join(f.dir, "model"))
			}
			want := readExpectedIn(t, f.dir, "left_pad", "float64")
			got := score(t, ctx, cfg, readInputIn(t, f.dir, "left_pad"), true)
			if !near(got.Loss, want.Loss, 0.15) || !near(got.Grad.GlobalL2, want.Grad.GlobalL2, 0.2*want.Grad.GlobalL2) {
				t.Errorf("loss %.5f (want %.5f ± 0.15), grad norm %.4f (want %.4f)", got.Loss, want.Loss, got.Grad.GlobalL2, want.Grad.GlobalL2)
			}
			t.Logf("bf16 compute: loss %.6f (reference %.6f), max log-prob error %.2g", got.Loss, want.Loss, maxDiff(got.TokenLogProbs, want.TokenLogProbs))
		})
	}
}

// Weights that do not fit the family's config are refused by name: llama-tiny's biases under a
// config without them, and the biases a config asks for but smollm2-tiny lacks.
func TestFamilies_WeightsMustFitTheConfig(t *testing.T) {
	stored, err := safetensors.ReadModelDir("../testdata/llama-tiny/model")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ReadConfig("../testdata/llama-tiny/model")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MLPBias = false
	err = SetWeights(context.New(), cfg, stored, dtypes.Float32, "llama-tiny")
	if err == nil || !strings.Contains(err.Error(), `"model.layers.0.mlp.down_proj.bias"`) || !strings.Contains(err.Error(), "2-layer Llama") {
		t.Errorf("MLP biases without mlp_bias: %v", err)
	}
	stored, err = safetensors.ReadModelDir("../testdata/smollm2-tiny/model")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = ReadConfig("../testdata/smollm2-tiny/model"); err != nil {
		t.Fatal(err)
	}
	cfg.AttentionBias = true
	err = SetWeights(context.New(), cfg, stored, dtypes.Float32, "smollm2-tiny")
	if err == nil || !strings.Contains(err.Error(), `tensor "model.layers.0.self_attn.q_proj.bias" is missing`) {
		t.Errorf("attention_bias without the biases: %v", err)
	}
}

// Each Gemma 3 option moves the gemma3-tiny log-probs far past the 1e-5 the match allows, so the
// fixture tells every one of them apart from its absence (the smallest effect measured: see the
// log).
func TestFamilies_Gemma3OptionsMatter(t *testing.T) {
	const dir = "../testdata/gemma3-tiny"
	ctx, cfg := loadFixture(t, dir, dtypes.Float32)
	want := readExpectedIn(t, dir, "left_pad", "float64").TokenLogProbs
	b := readInputIn(t, dir, "left_pad")
	for _, c := range []struct {
		name string
		drop func(c *Config)
	}{
		{"RMSNorm x·w instead of x·(1+w)", func(c *Config) { c.Gemma.drop.onePlusW = true }},
		{"no embedding scale √hidden", func(c *Config) { c.Gemma.drop.embedScale = true }},
		{"no post-attention/post-feedforward norms", func(c *Config) { c.Gemma.drop.postNorms = true }},
		{"no final_logit_softcapping", func(c *Config) { c.Gemma.FinalLogitSoftcapping = 0 }},
		{"no sliding window", func(c *Config) { c.Gemma.SlidingWindow = 1 << 20 }},
		{"window one wider (k ≥ q − W)", func(c *Config) { c.Gemma.SlidingWindow++ }},
		{"window one narrower (k > q − W + 1)", func(c *Config) { c.Gemma.SlidingWindow-- }},
		{"rope_theta on the sliding layers", func(c *Config) { c.Gemma.RopeLocalBaseFreq = c.RopeTheta }},
		{"no linear rope_scaling", func(c *Config) { c.Rope = Rope{} }},
		{"scores scaled by head_dim^-0.5", func(c *Config) { c.Gemma.QueryPreAttnScalar = float64(c.HeadDim) }},
	} {
		dropped := *cfg
		g := *cfg.Gemma
		dropped.Gemma = &g
		c.drop(&dropped)
		d := maxDiff(score(t, ctx, &dropped, b, false).TokenLogProbs, want)
		if d < 1e-3 {
			t.Errorf("%s: log-probs move by only %.2g", c.name, d)
		}
		t.Logf("%s: log-probs move by %.2g", c.name, d)
	}
}

// checkFixtureCase scores the fixture dir's input name (with gradients) and checks it against the
// float64 expected file: position ids exactly, log-probs and loss within 1e-5, each tensor's
// gradient L2 within 1e-4 relative; it logs the largest differences.
func checkFixtureCase(t *testing.T, ctx *context.Context, cfg *Config, dir, name string) {
	t.Helper()
	b := readInputIn(t, dir, name)
	want := readExpectedIn(t, dir, name, "float64")
	if got := PositionIDs(b.Mask); !slices.EqualFunc(got, want.PositionIDs, slices.Equal) {
		t.Errorf("position ids: got %v, want %v", got, want.PositionIDs)
	}
	got := score(t, ctx, cfg, b, true)
	checkReport(t, got, want, 1e-5, 1e-4)
	gradRel := 0.0
	for name, w := range want.Grad.L2 {
		gradRel = max(gradRel, math.Abs(got.Grad.L2[name]-w)/w)
	}
	t.Logf("max |Δ log-prob| %.2g, |Δ loss| %.2g, max relative Δ of a tensor's gradient L2 %.2g",
		maxDiff(got.TokenLogProbs, want.TokenLogProbs), math.Abs(got.Loss-want.Loss), gradRel)
}
