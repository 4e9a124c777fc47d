package grpo

import "github.com/posttrain/posttrain/models/generate"

// SetFirstTurns makes s's runs take their completions' first turns from f (generateFn) instead
// of the model's generation.
func SetFirstTurns(s *Setup, f func(prompts []*Prompt, opts generate.Options) ([]generate.Generation, error)) {
	s.firstTurns = f
}
