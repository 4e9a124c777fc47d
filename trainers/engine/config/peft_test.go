package config_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/grpo"
)

// The LoRA options are TRL's ModelConfig defaults on every trainer, read from --config YAML like
// the others, validated with one line naming the flag, and trajectory options for a resume.
func TestPEFT_DefaultsYAMLAndValidation(t *testing.T) {
	for _, method := range []string{"sft", "dpo", "kto", "grpo"} {
		cfg, err := trainers.New(method)
		if err != nil {
			t.Fatal(err)
		}
		p := config.PEFTOptions(cfg)
		if p == nil || !reflect.DeepEqual(*p, config.PEFT{LoraR: 16, LoraAlpha: 32, LoraDropout: 0.05}) {
			t.Fatalf("%s: PEFT options %+v, want TRL's defaults", method, p)
		}
		for _, f := range config.Fields(cfg) {
			if f.Group == "peft" && f.Resume != "" {
				t.Errorf("%s: %s is resume %q, want a trajectory option", method, f.Key, f.Resume)
			}
		}
	}
	c := grpo.DefaultConfig()
	yaml := "use_peft: true\nlora_r: 8\nlora_alpha: 16\nlora_dropout: 0.1\nlora_target_modules: [q_proj, o_proj]\nuse_rslora: true\nlora_modules_to_save: [lm_head]\n"
	if err := config.Load("run.yaml", []byte(yaml), c); err != nil {
		t.Fatal(err)
	}
	want := config.PEFT{UsePEFT: true, LoraR: 8, LoraAlpha: 16, LoraDropout: 0.1, LoraTargetModules: []string{"q_proj", "o_proj"}, UseRSLoRA: true,
		LoraModulesToSave: []string{"lm_head"}}
	if !reflect.DeepEqual(c.PEFT, want) {
		t.Fatalf("from YAML: %+v, want %+v", c.PEFT, want)
	}
	for _, bad := range []struct {
		edit func(c *grpo.Config)
		want string
	}{
		{func(c *grpo.Config) { c.LoraR = 0 }, "lora_r (--lora-r) must be ≥ 1, got 0"},
		{func(c *grpo.Config) { c.LoraDropout = 1 }, "lora_dropout (--lora-dropout) must be in [0, 1)"},
		{func(c *grpo.Config) { c.LoraTargetModules = []string{"all-linear", "q_proj"} }, "lora_target_modules (--lora-target-modules) all-linear must be given alone"},
		{func(c *grpo.Config) { c.SyncRefModel, c.Beta = true, 0.04 }, "sync_ref_model (--sync-ref-model) needs a reference model of its own"},
	} {
		c := grpo.DefaultConfig()
		c.Model, c.Dataset, c.OutputDir, c.RewardFuncs, c.UsePEFT = "m", "d", "o", []string{"r"}, true
		bad.edit(c)
		c.Resolve()
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("error %v, want %q", err, bad.want)
		}
	}
}
