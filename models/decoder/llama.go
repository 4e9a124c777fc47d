package decoder

import "math"

// Llama (transformers' modeling_llama.py): Llama 3.x, and SmolLM2, which is model_type llama too.
// The shared decoder with attention_bias (q/k/v/o alike) and mlp_bias as config.json says, and
// Llama 3.1/3.2's rope_scaling "llama3" (llama3InvFreq), which any family with the default
// RopeTypes accepts.
var _ = register("llama", Family{Name: "Llama", Architecture: "LlamaForCausalLM", AttentionBiasField: true, MLPBiasField: true,
	ConfigJSON: llamaConfigJSON})

// llamaConfigJSON is what LlamaConfig writes beyond the shared keys.
func llamaConfigJSON(m map[string]any, cfg *Config) {
	m["attention_bias"], m["mlp_bias"], m["head_dim"] = cfg.AttentionBias, cfg.MLPBias, cfg.HeadDim
	setDefault(m, "pretraining_tp", 1)
}

// llama3InvFreq rescales the default inverse frequencies inv in place by the llama3 rule
// (transformers' _compute_llama3_parameters): wavelengths 2π/f longer than
// original/low_freq_factor are divided by factor, shorter than original/high_freq_factor kept, and
// those between interpolated with s = (original/wavelength − low)/(high − low): f·((1−s)/factor + s).
func llama3InvFreq(r Rope, inv []float64) {
	old := float64(r.OriginalMaxPositionEmbeddings)
	lowWavelen, highWavelen := old/r.LowFreqFactor, old/r.HighFreqFactor
	for i, f := range inv {
		wavelen := 2 * math.Pi / f
		switch {
		case wavelen > lowWavelen:
			inv[i] = f / r.Factor
		case wavelen < highWavelen:
		default:
			s := (old/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
			inv[i] = (1-s)*f/r.Factor + s*f
		}
	}
}
