// Package decoder is the decoder-only transformer of every supported family in GoMLX — Qwen2,
// Qwen3 (dense), Llama 3.x (SmolLM2 is a Llama), SmolLM3 and Gemma 3 text — one implementation
// parameterised by the checkpoint's config.json. It gives HuggingFace transformers' numbers:
// config.json parsing, safetensors weights as GoMLX variables keyed by their HF names, the forward
// pass, chunked per-token log-probs, the mean NLL and its gradients, scoring, save and init.
//
// Where to look:
//   - family.go: what a model_type fixes (Family); each family registers itself and keeps the lines
//     in which it differs in a file of its own: qwen2.go, qwen3.go (q/k norms), llama.go (llama3
//     RoPE scaling), smollm3.go (NoPE layers), gemma3.go (its norms, scaled embeddings, GELU-tanh,
//     sliding-window layers, soft-capping). Adding a family is such a file and a fixture
//     (docs/models.md, "Adding a family").
//   - config.go, weights.go, rope.go: config.json, the weight list and names, RoPE.
//   - model.go: the shared forward pass (Decoder, Hidden, Logits); score.go, logprobs.go: scoring.
//   - classifier.go: the *ForSequenceClassification form (the score head of a reward or value model).
//   - arch.go: Arch, the decoder as package generate's Generator runs it (generate.Model: the prompt
//     pass, the decode step against the KV cache, the uncached last logits); decode_layout.go and
//     decode_upcast.go: the weight layouts its decode step reads on the pure-Go and XLA backends.
//   - save.go, init.go: writing checkpoints and random initialisation.
//
// Variables live in a context.Context at scopes equal to the HF names:
// "model.layers.0.self_attn.q_proj.weight" is the variable "weight" of scope
// "/model/layers/0/self_attn/q_proj" (see VarScope and HFName).
package decoder
