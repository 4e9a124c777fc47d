package main

import (
	"slices"

	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// benchPEFTFlags are `bench sft`'s LoRA flags: the same names and defaults as the trainers'
// (TRL's ModelConfig), so that one configuration can be timed with and without an adapter.
func benchPEFTFlags() []cli.Flag {
	d := config.DefaultPEFT()
	return []cli.Flag{
		&cli.BoolFlag{Name: "use-peft", Usage: "train a LoRA adapter instead of every weight (the base frozen, no float32 masters under bfloat16)"},
		&cli.IntFlag{Name: "lora-r", Value: d.LoraR, Usage: "LoRA rank r"},
		&cli.IntFlag{Name: "lora-alpha", Value: d.LoraAlpha, Usage: "LoRA alpha α"},
		&cli.StringSliceFlag{Name: "lora-target-modules", Usage: "layers that get an adapter (all-linear: every linear layer but the LM head; empty: PEFT's default for the model_type)"},
		&cli.BoolFlag{Name: "use-rslora", Usage: "scale the update by α/√r"},
	}
}

// benchLoRAConfig is the adapter `bench sft --use-peft` trains, or nil (no such flag, or not set).
func benchLoRAConfig(cmd *cli.Command) *lora.Config {
	if !slices.ContainsFunc(cmd.Flags, func(f cli.Flag) bool { return slices.Contains(f.Names(), "use-peft") }) || !cmd.Bool("use-peft") {
		return nil
	}
	return &lora.Config{R: cmd.Int("lora-r"), Alpha: float64(cmd.Int("lora-alpha")), TargetModules: cmd.StringSlice("lora-target-modules"),
		UseRSLoRA: cmd.Bool("use-rslora")}
}
