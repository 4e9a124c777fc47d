package decoder

import (
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// smolLM3Config is a SmolLM3 config.json with the given extra keys.
func smolLM3Config(extra string) string {
	return `{"model_type": "smollm3", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 8, "num_attention_heads": 4` + extra + `}`
}

// SmolLM3Config's defaults: no_rope_layers from no_rope_layer_interval (4, every fourth layer
// NoPE), tied embeddings, rope_theta 2e6, 4 key/value heads; an explicit no_rope_layers wins over
// the interval.
func TestSmolLM3_ConfigDefaults(t *testing.T) {
	cfg, err := ParseConfig([]byte(smolLM3Config("")))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 1, 1, 0, 1, 1, 1, 0}; !slices.Equal(cfg.NoRopeLayers, want) || cfg.NoRopeLayerInterval != 4 {
		t.Errorf("no_rope_layers %v interval %d, want %v 4", cfg.NoRopeLayers, cfg.NoRopeLayerInterval, want)
	}
	if !cfg.TieWordEmbeddings || cfg.RopeTheta != 2e6 || cfg.NumKeyValueHeads != 4 || cfg.HeadDim != 16 {
		t.Errorf("tied %v rope_theta %g kv heads %d head_dim %d, want true 2e6 4 16", cfg.TieWordEmbeddings, cfg.RopeTheta, cfg.NumKeyValueHeads, cfg.HeadDim)
	}
	var uses []bool
	for i := range cfg.NumHiddenLayers {
		uses = append(uses, cfg.UsesRope(i))
	}
	if want := []bool{true, true, true, false, true, true, true, false}; !slices.Equal(uses, want) {
		t.Errorf("UsesRope %v, want %v", uses, want)
	}
	cfg, err = ParseConfig([]byte(smolLM3Config(`, "no_rope_layer_interval": 3, "tie_word_embeddings": false,
		"num_key_value_heads": 2, "rope_parameters": {"rope_type": "default", "rope_theta": 5000000.0}`)))
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{1, 1, 0, 1, 1, 0, 1, 1}; !slices.Equal(cfg.NoRopeLayers, want) || cfg.TieWordEmbeddings || cfg.RopeTheta != 5e6 || cfg.NumKeyValueHeads != 2 {
		t.Errorf("interval 3: %v tied %v theta %g kv %d", cfg.NoRopeLayers, cfg.TieWordEmbeddings, cfg.RopeTheta, cfg.NumKeyValueHeads)
	}
	cfg, err = ParseConfig([]byte(smolLM3Config(`, "no_rope_layer_interval": 4, "no_rope_layers": [0, 1, 1, 1, 1, 1, 1, 1]`)))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.UsesRope(0) || !cfg.UsesRope(3) || !cfg.UsesRope(7) {
		t.Errorf("explicit no_rope_layers %v not followed", cfg.NoRopeLayers)
	}
	// With a list, SmolLM3Config never reads the interval: 0 is accepted (and kept for saving).
	cfg, err = ParseConfig([]byte(smolLM3Config(`, "no_rope_layer_interval": 0, "no_rope_layers": [1, 1, 1, 1, 1, 1, 1, 0]`)))
	if err != nil || cfg.UsesRope(7) || cfg.NoRopeLayerInterval != 0 {
		t.Errorf("interval 0 with a list: %v", err)
	}
	// The other families ignore the keys (transformers' Llama does too).
	cfg, err = ParseConfig([]byte(`{"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
		"num_hidden_layers": 2, "num_attention_heads": 4, "no_rope_layers": [0, 0]}`))
	if err != nil || !cfg.UsesRope(0) || !cfg.UsesRope(1) {
		t.Errorf("llama with no_rope_layers: %v, UsesRope(0) %v", err, err == nil && cfg.UsesRope(0))
	}
}

// What SmolLM3Config or this implementation cannot take is refused, naming the field.
func TestSmolLM3_ConfigRefused(t *testing.T) {
	for _, c := range []struct{ extra, want string }{
		{`, "no_rope_layers": [1, 0, 1]`, "config field no_rope_layers: has 3 entries for 8 layers"},
		{`, "no_rope_layers": [1, 1, 1, 2, 1, 1, 1, 0]`, "config field no_rope_layers: entry 3 is 2"},
		{`, "no_rope_layer_interval": 0`, "config field no_rope_layer_interval: must be positive to derive no_rope_layers, got 0"},
		{`, "no_rope_layer_interval": -2, "no_rope_layers": []`, "config field no_rope_layers: has 0 entries for 8 layers"},
		{`, "use_sliding_window": true, "sliding_window": 4`, "config field use_sliding_window: true is not supported"},
		{`, "layer_types": ["full_attention", "sliding_attention", "full_attention", "full_attention", "full_attention", "full_attention", "full_attention", "full_attention"]`, `config field layer_types: layer 1 is "sliding_attention"`},
		{`, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}`, `config field rope_scaling.rope_type: "yarn" is not supported`},
		{`, "hidden_act": "gelu"`, `config field hidden_act: "gelu" is not supported`},
	} {
		_, err := ParseConfig([]byte(smolLM3Config(c.extra)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", c.extra, err, c.want)
		}
	}
}

// The smollm3-tiny fixture tells the NoPE layers apart: applying RoPE on layers 1 and 3 too (as a
// Llama would) moves the log-probs by 0.35, and RoPE on no layer by 1.2 (measured), far beyond the
// 1e-5 the match allows (TestFamilies_MatchReference).
func TestSmolLM3_NoPEMatters(t *testing.T) {
	const dir = "../testdata/smollm3-tiny"
	ctx, cfg := loadFixture(t, dir, dtypes.Float32)
	if !slices.Equal(cfg.NoRopeLayers, []int{1, 0, 1, 0}) {
		t.Fatalf("fixture no_rope_layers %v, want [1 0 1 0]", cfg.NoRopeLayers)
	}
	want := readExpectedIn(t, dir, "left_pad", "float64").TokenLogProbs
	for _, layers := range [][]int{{1, 1, 1, 1}, {0, 0, 0, 0}} {
		cfg.NoRopeLayers = layers
		got := score(t, ctx, cfg, readInputIn(t, dir, "left_pad"), false)
		d := maxDiff(got.TokenLogProbs, want)
		t.Logf("no_rope_layers %v: log-probs move by %.2g", layers, d)
		if d < 1e-3 {
			t.Errorf("no_rope_layers %v: the log-probs differ by only %g", layers, d)
		}
	}
}

// The smollm3-3b preset is SmolLM3-3B's config: every fourth layer NoPE (3, 7, ..., 35), no BOS,
// EOS <|im_end|> 128012; smollm3-tiny is the fixture's shape with its NoPE layers 1 and 3.
func TestSmolLM3_Presets(t *testing.T) {
	cfg, err := Preset("smollm3-3b")
	if err != nil {
		t.Fatal(err)
	}
	var nope []int
	for i := range cfg.NumHiddenLayers {
		if !cfg.UsesRope(i) {
			nope = append(nope, i)
		}
	}
	if want := []int{3, 7, 11, 15, 19, 23, 27, 31, 35}; !slices.Equal(nope, want) || cfg.BOSTokenID != nil ||
		!slices.Equal(cfg.EOSTokenIDs, []int{128012}) || cfg.RopeTheta != 5e6 || cfg.MaxPositionEmbeddings != 65536 {
		t.Errorf("smollm3-3b: NoPE layers %v (want %v), bos %v, eos %v, rope_theta %g, positions %d", nope, want,
			cfg.BOSTokenID, cfg.EOSTokenIDs, cfg.RopeTheta, cfg.MaxPositionEmbeddings)
	}
	tiny, err := Preset("smollm3-tiny")
	if err != nil {
		t.Fatal(err)
	}
	fixture, err := ReadConfig("../testdata/smollm3-tiny/model")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(tiny.NoRopeLayers, fixture.NoRopeLayers) || tiny.HiddenSize != fixture.HiddenSize ||
		tiny.NumHiddenLayers != fixture.NumHiddenLayers || tiny.NumKeyValueHeads != fixture.NumKeyValueHeads {
		t.Errorf("smollm3-tiny %+v, fixture %+v", tiny, fixture)
	}
}
