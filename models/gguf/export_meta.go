package gguf

import (
	"github.com/posttrain/posttrain/models/decoder"
)

// exportMetadata is the general.* and <arch>.* metadata convert_hf_to_gguf.py writes for cfg
// (TextModel.set_gguf_parameters and the family's additions), in its order and gguf-py's types:
// block_count, context_length, embedding_length, feed_forward_length, head_count(_kv),
// rope.freq_base, attention.layer_norm_rms_epsilon, attention.key_length/value_length, file_type;
// llama: vocab_size, rope.dimension_count; gemma3: rope.freq_base_swa, final_logit_softcapping,
// attention.sliding_window, rope.scaling.*, and attention.sliding_window_pattern when it is not
// 6: llama.cpp's loader reads it (load_swa_pattern), its converter does not write it, and
// without it llama.cpp would run every layer but each sixth as a sliding one.
func exportMetadata(cfg *decoder.Config, name, modelName string, ftype uint32) ([]KV, error) {
	u32 := func(k string, v int) KV { return KV{name + "." + k, TypeUint32, uint32(v)} }
	f32 := func(k string, v float64) KV { return KV{name + "." + k, TypeFloat32, float32(v)} }
	kvs := []KV{{"general.architecture", TypeString, name}, {"general.type", TypeString, "model"}}
	if modelName != "" {
		kvs = append(kvs, KV{"general.name", TypeString, modelName})
	}
	kvs = append(kvs, u32("block_count", cfg.NumHiddenLayers), u32("context_length", cfg.MaxPositionEmbeddings),
		u32("embedding_length", cfg.HiddenSize), u32("feed_forward_length", cfg.IntermediateSize),
		u32("attention.head_count", cfg.NumAttentionHeads), u32("attention.head_count_kv", cfg.NumKeyValueHeads))
	if cfg.Rope.Type == "linear" {
		kvs = append(kvs, KV{name + ".rope.scaling.type", TypeString, "linear"}, f32("rope.scaling.factor", cfg.Rope.Factor))
	}
	kvs = append(kvs, f32("rope.freq_base", cfg.RopeTheta))
	if name == "gemma3" {
		kvs = append(kvs, f32("rope.freq_base_swa", cfg.Gemma.RopeLocalBaseFreq))
	}
	kvs = append(kvs, f32("attention.layer_norm_rms_epsilon", cfg.RMSNormEps))
	// transformers' LlamaConfig, Qwen3Config and Gemma3TextConfig always have head_dim (the
	// converter writes it from there); Qwen2Config has none unless config.json gives one.
	if name != "qwen2" || cfg.HeadDim != cfg.HiddenSize/cfg.NumAttentionHeads {
		kvs = append(kvs, u32("attention.key_length", cfg.HeadDim), u32("attention.value_length", cfg.HeadDim))
	}
	kvs = append(kvs, KV{"general.file_type", TypeUint32, ftype})
	switch name {
	case "llama":
		kvs = append(kvs, u32("vocab_size", cfg.VocabSize), u32("rope.dimension_count", cfg.HeadDim))
	case "gemma3":
		g := cfg.Gemma
		if g.FinalLogitSoftcapping != 0 {
			kvs = append(kvs, f32("final_logit_softcapping", g.FinalLogitSoftcapping))
		}
		p, err := slidingPattern(cfg.LayerTypes)
		if err != nil {
			return nil, err
		}
		if p > 0 {
			kvs = append(kvs, u32("attention.sliding_window", g.SlidingWindow))
			if p != decoder.DefaultSlidingWindowPattern {
				kvs = append(kvs, u32("attention.sliding_window_pattern", p))
			}
		}
	}
	return kvs, nil
}
