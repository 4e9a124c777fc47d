// Package trainable is the model a trainer trains, as the driver (trainers/engine/loop) and the losses
// see it: a checkpoint loaded into a GoMLX context with float32 masters of its weights and, in
// bf16 runs, the bfloat16 copies the forward pass reads (model.go, master.go); a LoRA adapter
// attached or loaded (adapter.go); the *ForSequenceClassification form of a reward model
// (classifier.go) and the reward-model Scorer (scorer.go); PPO's value model trained beside the
// policy (value.go); the padded row layout every loss reads (rows.go); sequence and reference
// log-probs (logprobs.go); saving in HF layout with the model card TRL's trainers write (card.go).
// The forward pass itself is models/decoder's.
package trainable
