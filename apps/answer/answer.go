// Package eval answers prompts greedily with a checkpoint, the way the trainers' held-out
// evaluations (posttrain eval, the demo) score a model: the checkpoint's own chat template
// (add_generation_prompt), every EOS id it declares (models/encode renders, tokenizes and gives the
// stop ids), batched KV-cache generation.
package answer

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/models/lora"
)

// Greedy returns the greedy completion text (special tokens skipped) of every conversational
// prompt with the checkpoint in dir, generating at most maxNew tokens, batch prompts at a time
// (batch ≤ 0: all at once).
func Greedy(b backends.Backend, dir string, prompts [][]chat.Message, maxNew, batch int) ([]string, error) {
	return GreedyAdapter(b, dir, "", prompts, maxNew, batch)
}

// GreedyAdapter is Greedy with the PEFT LoRA adapter saved in adapter (models/lora) on the
// checkpoint in dir; "" is the checkpoint alone.
func GreedyAdapter(b backends.Backend, dir, adapter string, prompts [][]chat.Message, maxNew, batch int) ([]string, error) {
	ctx, cfg, err := decoder.Load(dir, dtypes.Float32)
	if err != nil {
		return nil, err
	}
	if adapter != "" {
		if _, err := lora.Load(ctx, cfg, adapter); err != nil {
			return nil, err
		}
	}
	txt, err := encode.Load(dir, encode.Options{Template: encode.TemplateRequired})
	if err != nil {
		return nil, err
	}
	tok := txt.Tokenizer
	stop, err := txt.StopIDs(cfg)
	if err != nil {
		return nil, err
	}
	rows := make([]data.Row, len(prompts))
	for i, msgs := range prompts {
		rows[i] = data.Row{Line: i + 1, Prompt: data.Text{Messages: msgs}}
	}
	rendered, err := txt.Prompts(rows)
	if err != nil {
		return nil, err
	}
	if batch <= 0 {
		batch = max(len(rendered), 1)
	}
	gen := generate.NewGenerator(b, ctx, decoder.Arch{Config: cfg})
	defer gen.Finalize()
	out := make([]string, 0, len(rendered))
	for lo := 0; lo < len(rendered); lo += batch {
		var ids [][]int32
		for _, p := range rendered[lo:min(lo+batch, len(rendered))] {
			ids = append(ids, p.IDs)
		}
		gens, err := gen.Generate(ids, generate.Options{MaxNewTokens: maxNew, StopIDs: stop, Tokenizer: tok})
		if err != nil {
			return nil, err
		}
		for _, g := range gens {
			out = append(out, g.Text)
		}
	}
	return out, nil
}
