package decoder

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/posttrain/posttrain/models/safetensors"
)

// PresetNames lists the model shapes Preset knows.
var PresetNames = []string{"tiny", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen3-0.6b", "qwen3-tiny", "llama-3.2-1b", "llama-3.2-tiny",
	"llama-3.1-8b", "smollm2-135m", "smollm2-tiny", "smollm3-3b", "smollm3-tiny", "gemma-3-270m", "gemma-3-tiny"}

// RealPreset reports whether the preset is a released model's shape (its vocab_size is the
// model's, padded past the tokenizer in Qwen's case), not a tiny test shape.
func RealPreset(name string) bool {
	switch strings.ToLower(name) {
	case "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-7b", "qwen3-0.6b", "llama-3.2-1b", "llama-3.1-8b", "smollm2-135m", "smollm3-3b", "gemma-3-270m":
		return true
	}
	return false
}

// Preset returns the config of a named model shape. The real shapes take every value from the
// released config.json; each tiny variant keeps its family's features (q/k norms and head_dim
// for Qwen3, llama3 RoPE scaling for Llama 3.2, SmolLM2's RoPE base and init range) at a test
// size, with vocabulary 512, bos 509 and eos 511 (the models/testdata fixtures' ids):
//   - "tiny": the qwen2-tiny fixture's shape (vocab 1024, hidden 64, 2 layers, 4/2 heads,
//     intermediate 176, tied, bos 1022, eos 1023), for tests;
//   - "qwen2.5-0.5b": Qwen2.5-0.5B exactly (vocab 151936, hidden 896, 24 layers, 14/2 heads,
//     intermediate 4864, tied, rope_theta 1e6, rms_norm_eps 1e-6, 32768 positions,
//     bos = eos = 151643 <|endoftext|>): 494,032,768 parameters;
//   - "qwen2.5-1.5b": Qwen/Qwen2.5-1.5B-Instruct's config.json (transformers 4.50.0.dev0): vocab
//     151936, hidden 1536, 28 layers, 12/2 heads, intermediate 8960, tied, rope_theta 1e6,
//     rms_norm_eps 1e-6, 32768 positions, bos 151643, eos 151645: 1,543,714,304 parameters;
//   - "qwen2.5-7b": Qwen/Qwen2.5-7B's config.json (transformers 4.40.1): vocab 152064, hidden
//     3584, 28 layers, 28/4 heads, intermediate 18944, untied, rope_theta 1e6, rms_norm_eps 1e-6,
//     131072 positions, bos = eos = 151643: 7,615,616,512 parameters;
//   - "qwen3-0.6b": Qwen/Qwen3-0.6B's config.json (transformers 4.51.0): vocab 151936, hidden
//     1024, 28 layers, 16/8 heads, head_dim 128, intermediate 3072, tied, rope_theta 1e6,
//     rms_norm_eps 1e-6, 40960 positions, bos 151643, eos 151645, no attention bias;
//     "qwen3-tiny": the qwen3-tiny fixture's shape (hidden 64, 2 layers, 4/2 heads, head_dim 32,
//     intermediate 128, 4096 positions);
//   - "llama-3.2-1b": meta-llama/Llama-3.2-1B's config.json (transformers 4.45.0.dev0): vocab
//     128256, hidden 2048, 16 layers, 32/8 heads, head_dim 64, intermediate 8192, tied,
//     rope_theta 500000 with rope_scaling llama3 (factor 32, low 1, high 4, original 8192),
//     rms_norm_eps 1e-5, 131072 positions, bos 128000, eos 128001, no attention or MLP bias
//     (Llama-3.2-1B-Instruct differs only in eos [128001, 128008, 128009]; --tokenizer sets
//     the ids); "llama-3.2-tiny": hidden 64, 2 layers, 4/2 heads, head_dim 16, intermediate 128;
//   - "llama-3.1-8b": meta-llama/Llama-3.1-8B's config.json (transformers 4.43.0.dev0): vocab
//     128256, hidden 4096, 32 layers, 32/8 heads, intermediate 14336, untied, rope_theta 500000
//     with rope_scaling llama3 (factor 8, low 1, high 4, original 8192), rms_norm_eps 1e-5,
//     131072 positions, bos 128000, eos 128001, no attention or MLP bias: 8,030,261,248
//     parameters;
//   - "smollm2-135m": HuggingFaceTB/SmolLM2-135M's config.json (transformers 4.40.1): a llama,
//     vocab 49152, hidden 576, 30 layers, 9/3 heads (head_dim 64), intermediate 1536, tied,
//     rope_theta 100000, no rope_scaling, rms_norm_eps 1e-5, initializer_range 1/24, 8192
//     positions, bos = eos = 0 (the -Instruct model's are 1 and 2, from its tokenizer);
//     "smollm2-tiny": the smollm2-tiny fixture's shape (hidden 48, 2 layers, 3/1 heads,
//     intermediate 128);
//   - "smollm3-3b": HuggingFaceTB/SmolLM3-3B's config.json (transformers 4.54): model_type
//     smollm3, vocab 128256, hidden 2048, 36 layers, 16/4 heads (head_dim 128), intermediate
//     11008, tied, rope_theta 5e6, no rope_scaling, rms_norm_eps 1e-6, 65536 positions,
//     no_rope_layer_interval 4 (layers 3, 7, ..., 35 NoPE), no biases, bos none, eos 128012
//     <|im_end|>: 3,075,098,624 parameters; "smollm3-tiny": the smollm3-tiny fixture's shape
//     (hidden 64, 4 layers, 4/2 heads, intermediate 128, no_rope_layer_interval 2: layers 1 and
//     3 NoPE), without its MLP biases.
//   - "gemma-3-270m": google/gemma-3-270m's config.json (transformers 4.55.0.dev0): gemma3_text,
//     vocab 262144, hidden 640, 18 layers (layer_types: every 6th full attention, the others
//     sliding with sliding_window 512), 4/1 heads, head_dim 256, intermediate 2048, tied,
//     query_pre_attn_scalar 256, rope_theta 1e6, rope_local_base_freq 10000, no rope_scaling or
//     soft-capping, rms_norm_eps 1e-6, 32768 positions, bos 2, eos 1: 268,098,176 parameters;
//     "gemma-3-tiny": hidden 64, 2 layers (sliding then full, sliding_window 4), 4/2 heads,
//     head_dim 32, intermediate 128, query_pre_attn_scalar 32.
//
// Sources of the released configs as quoted in public repositories (the Hub itself is not
// reachable here): Qwen3-0.6B in a model report beside Qwen3ForCausalLM configs and in several
// test files with transformers_version 4.51.0; Llama-3.2-1B in a project's configs module
// ("As a reference, This is the config.json of Llama-3.2-1B model"); SmolLM2-135M in a
// SmolLMv2 reproduction's README ("SmolLMv2 Configuration Used", transformers_version 4.40.1);
// SmolLM3-3B in the config.json of fine-tunes published with the 3B's unchanged config (e.g.
// koutch/0.json_train_grpo_v1_dev, N-Bot-Int/SmolSam3-merged: bos null, eos 128012, hidden 2048,
// intermediate 11008, 65536 positions, the 1,1,1,0 no_rope_layers) and in several projects'
// tests quoting it (rope_theta 5e6, 16/4 heads, 36 layers, vocab 128256).
// Qwen2.5-1.5B-Instruct as a training log quotes its Qwen2Config whole (a run of a GRPO project,
// 2025-02-19); Qwen2.5-7B and Llama-3.1-8B in a profiling project's model configs
// (citsjtu2020/LLM-Prof, sglang/Model_Config.md, beside Qwen2.5-3B/14B/32B).
// gemma-3-270m as a test file of safety-research/circuit-tracer quotes it whole
// (tests/test_attributions_gemma3_nnsight.py, which loads "google/gemma-3-270m" beside it), its
// shape agreeing with the ollama library's GGUF metadata of gemma3:270m.
func Preset(name string) (*Config, error) {
	id := func(v int) *int { return &v }
	base := Config{ModelType: "qwen2", HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, MaxPositionEmbeddings: 32768, InitializerRange: 0.02, TorchDType: "float32"}
	llama3Rope := Rope{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}
	cfg := base
	switch strings.ToLower(name) {
	case "tiny":
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 1024, 64, 176, 2
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 4, 2
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(1022), []int{1023}
	case "qwen2.5-0.5b":
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 151936, 896, 4864, 24
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 14, 2
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(151643), []int{151643}
	case "qwen2.5-1.5b":
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 151936, 1536, 8960, 28
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 12, 2
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(151643), []int{151645}
	case "qwen2.5-7b":
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 152064, 3584, 18944, 28
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 28, 4
		cfg.TieWordEmbeddings, cfg.MaxPositionEmbeddings = false, 131072
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(151643), []int{151643}
	case "llama-3.1-8b":
		cfg.ModelType, cfg.RopeTheta, cfg.RMSNormEps, cfg.MaxPositionEmbeddings = "llama", 500000, 1e-5, 131072
		cfg.Rope = llama3Rope
		cfg.Rope.Factor = 8
		cfg.TieWordEmbeddings = false
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 128256, 4096, 14336, 32
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 32, 8, 128
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(128000), []int{128001}
	case "qwen3-0.6b":
		cfg.ModelType, cfg.MaxPositionEmbeddings = "qwen3", 40960
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 151936, 1024, 3072, 28
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 16, 8, 128
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(151643), []int{151645}
	case "qwen3-tiny":
		cfg.ModelType, cfg.MaxPositionEmbeddings = "qwen3", 4096
		cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 512, 64, 128, 2
		cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 4, 2, 32
		cfg.BOSTokenID, cfg.EOSTokenIDs = id(509), []int{511}
	case "llama-3.2-1b", "llama-3.2-tiny":
		cfg.ModelType, cfg.RopeTheta, cfg.Rope, cfg.RMSNormEps, cfg.MaxPositionEmbeddings = "llama", 500000, llama3Rope, 1e-5, 131072
		if strings.ToLower(name) == "llama-3.2-1b" {
			cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 128256, 2048, 8192, 16
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 32, 8, 64
			cfg.BOSTokenID, cfg.EOSTokenIDs = id(128000), []int{128001}
		} else {
			cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 512, 64, 128, 2
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim = 4, 2, 16
			cfg.BOSTokenID, cfg.EOSTokenIDs = id(509), []int{511}
		}
	case "smollm2-135m", "smollm2-tiny":
		cfg.ModelType, cfg.RopeTheta, cfg.RMSNormEps, cfg.MaxPositionEmbeddings = "llama", 100000, 1e-5, 8192
		cfg.InitializerRange = 0.041666666666666664
		if strings.ToLower(name) == "smollm2-135m" {
			cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 49152, 576, 1536, 30
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 9, 3
			cfg.BOSTokenID, cfg.EOSTokenIDs = id(0), []int{0}
		} else {
			cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 512, 48, 128, 2
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads = 3, 1
			cfg.BOSTokenID, cfg.EOSTokenIDs = id(509), []int{511}
		}
	case "smollm3-3b", "smollm3-tiny":
		cfg.ModelType, cfg.RopeTheta, cfg.MaxPositionEmbeddings = "smollm3", 5e6, 65536
		if strings.ToLower(name) == "smollm3-3b" {
			cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 128256, 2048, 11008, 36
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.NoRopeLayerInterval = 16, 4, 4
			cfg.EOSTokenIDs = []int{128012}
		} else {
			cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 512, 64, 128, 4
			cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.NoRopeLayerInterval = 4, 2, 2
			cfg.BOSTokenID, cfg.EOSTokenIDs = id(509), []int{511}
		}
		cfg.NoRopeLayers = SmolLM3NoRopeLayers(cfg.NumHiddenLayers, cfg.NoRopeLayerInterval)
	case "gemma-3-270m", "gemma-3-tiny":
		cfg = gemma3Preset(strings.ToLower(name) == "gemma-3-270m")
	default:
		return nil, fmt.Errorf("model: unknown preset %q; valid: %s", name, strings.Join(PresetNames, ", "))
	}
	if cfg.HeadDim == 0 {
		cfg.HeadDim = cfg.HiddenSize / cfg.NumAttentionHeads
	}
	return &cfg, cfg.Validate()
}

// initRandSeed2 is the second PCG word of the weight initialisation stream.
const initRandSeed2 = 0x9e3779b97f4a7c15

// InitTensors draws the weights of a randomly initialised model as HF's Qwen2 (Qwen3, Llama)
// _init_weights does — linear and embedding weights ~ N(0, initializer_range²), biases 0, norm
// weights 1 (Gemma 3: 0) — in float32 from seed (the same draws as InitWeights), stored as dtype ("F32",
// "BF16", "F16"). It holds one float32 tensor at a time besides the result.
func InitTensors(cfg *Config, seed uint64, dtype string) ([]*safetensors.Tensor, error) {
	if dtype != "F32" && dtype != "BF16" && dtype != "F16" {
		return nil, fmt.Errorf("%s init: dtype %q is not supported; valid: F32, BF16, F16", cfg.errName(), dtype)
	}
	var out []*safetensors.Tensor
	drawInit(cfg, seed, func(s TensorSpec, data []float32) error {
		out = append(out, safetensors.FromFloat32s(s.Name, s.Shape, data, dtype))
		return nil
	})
	return out, nil
}

// drawInit draws HF's Qwen2 initialisation of every tensor of cfg, in HF order, from one float32
// stream seeded by seed — linear and embedding weights ~ N(0, initializer_range²), biases 0, norm
// weights 1 (Gemma 3's 0: its norms scale by 1 + w) — and hands each to emit (which may keep data). InitTensors and InitWeights share it,
// so a checkpoint written by `posttrain init` equals a model initialised in memory.
func drawInit(cfg *Config, seed uint64, emit func(s TensorSpec, data []float32) error) error {
	rng := rand.New(rand.NewPCG(seed, initRandSeed2))
	for _, s := range cfg.Tensors() {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		data := make([]float32, n)
		switch {
		case strings.HasSuffix(s.Name, "norm.weight") && cfg.Gemma != nil:
		case strings.HasSuffix(s.Name, "norm.weight"):
			for i := range data {
				data[i] = 1
			}
		case strings.HasSuffix(s.Name, ".bias"):
		default:
			for i := range data {
				data[i] = float32(rng.NormFloat64() * cfg.InitializerRange)
			}
		}
		if err := emit(s, data); err != nil {
			return err
		}
	}
	return nil
}

// InitCheckpoint writes a randomly initialised checkpoint of cfg to dir (see InitTensors and
// Save for the layout), without building the model in memory: about one copy of the weights in
// the stored dtype plus one float32 tensor.
func InitCheckpoint(dir string, cfg *Config, seed uint64, opts SaveOptions) error {
	st, _, err := storedDType(opts.DType)
	if err != nil {
		return fmt.Errorf("%s init: %w", cfg.errName(), err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("%s init: %w", cfg.errName(), err)
	}
	weights, err := InitTensors(cfg, seed, st)
	if err != nil {
		return err
	}
	return writeAtomic(dir, cfg.errName(), opts, func(tmp string) error { return writeCheckpoint(tmp, cfg, weights, opts) })
}
