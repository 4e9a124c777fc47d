package gguf

import (
	"github.com/posttrain/posttrain/models/qwen2"
)

// exportMetadata is the general.* and <arch>.* metadata convert_hf_to_gguf.py writes for cfg
// (TextModel.set_gguf_parameters and the family's additions), in its order and gguf-py's types:
// block_count, context_length, embedding_length, feed_forward_length, head_count(_kv),
// rope.freq_base, attention.layer_norm_rms_epsilon, attention.key_length/value_length, file_type;
// llama: vocab_size, rope.dimension_count; gemma3: attention.sliding_window,
// final_logit_softcapping, rope.scaling.*, and the two keys llama.cpp's loader reads but its
// converter does not write when they differ from its defaults (attention.sliding_window_pattern
// other than 6, rope.freq_base_swa other than 10000): without them the model would change.
func exportMetadata(cfg *qwen2.Config, name, modelName string, ftype uint32) ([]KV, error) {
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
	kvs = append(kvs, f32("rope.freq_base", cfg.RopeTheta), f32("attention.layer_norm_rms_epsilon", cfg.RMSNormEps))
	if name == "gemma3" || name == "qwen3" || cfg.HeadDim != cfg.HiddenSize/cfg.NumAttentionHeads {
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
			if p != qwen2.DefaultSlidingWindowPattern {
				kvs = append(kvs, u32("attention.sliding_window_pattern", p))
			}
			if g.RopeLocalBaseFreq != 10000 {
				kvs = append(kvs, f32("rope.freq_base_swa", g.RopeLocalBaseFreq))
			}
		}
	}
	return kvs, nil
}
