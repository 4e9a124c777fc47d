package qwen2

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/posttrain/posttrain/models/safetensors"
)

// PresetNames lists the model shapes Preset knows.
var PresetNames = []string{"tiny", "qwen2.5-0.5b"}

// Preset returns the config of a named model shape:
//   - "tiny": the qwen2-tiny fixture's shape (vocab 1024, hidden 64, 2 layers, 4/2 heads,
//     intermediate 176, tied, bos 1022, eos 1023), for tests;
//   - "qwen2.5-0.5b": Qwen2.5-0.5B exactly (vocab 151936, hidden 896, 24 layers, 14/2 heads,
//     intermediate 4864, tied, rope_theta 1e6, rms_norm_eps 1e-6, 32768 positions,
//     bos = eos = 151643 <|endoftext|>): 494,032,768 parameters.
func Preset(name string) (*Config, error) {
	id := func(v int) *int { return &v }
	base := Config{ModelType: "qwen2", HiddenAct: "silu", RMSNormEps: 1e-6, RopeTheta: 1e6,
		TieWordEmbeddings: true, MaxPositionEmbeddings: 32768, InitializerRange: 0.02, TorchDType: "float32"}
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
	default:
		return nil, fmt.Errorf("qwen2: unknown preset %q; valid: %s", name, strings.Join(PresetNames, ", "))
	}
	cfg.HeadDim = cfg.HiddenSize / cfg.NumAttentionHeads
	return &cfg, cfg.Validate()
}

// initRandSeed2 is the second PCG word of the weight initialisation stream.
const initRandSeed2 = 0x9e3779b97f4a7c15

// InitTensors draws the weights of a randomly initialised model as HF's Qwen2 (Qwen3, Llama)
// _init_weights does — linear and embedding weights ~ N(0, initializer_range²), biases 0, norm
// weights 1 — in float32 from seed (the same draws as InitWeights), stored as dtype ("F32",
// "BF16", "F16"). It holds one float32 tensor at a time besides the result.
func InitTensors(cfg *Config, seed uint64, dtype string) ([]*safetensors.Tensor, error) {
	if dtype != "F32" && dtype != "BF16" && dtype != "F16" {
		return nil, fmt.Errorf("qwen2 init: dtype %q is not supported; valid: F32, BF16, F16", dtype)
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
// weights 1 — and hands each to emit (which may keep data). InitTensors and InitWeights share it,
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
		return fmt.Errorf("qwen2 init: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("qwen2 init: %w", err)
	}
	weights, err := InitTensors(cfg, seed, st)
	if err != nil {
		return err
	}
	return writeAtomic(dir, func(tmp string) error { return writeCheckpoint(tmp, cfg, weights, opts) })
}
