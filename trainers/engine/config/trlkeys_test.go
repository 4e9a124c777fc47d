package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/grpo"
	"github.com/posttrain/posttrain/trainers/sft"
)

func trlYAML(t *testing.T, name string) (string, []byte) {
	t.Helper()
	path := filepath.Join("testdata", "trl_yaml", name)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// noteKeys are the keys LoadNotes noted, in order.
func noteKeys(notes []string) []string {
	var out []string
	for _, n := range notes {
		_, rest, _ := strings.Cut(n, ".yaml:")
		_, rest, _ = strings.Cut(rest, ": ")
		k, _, _ := strings.Cut(rest, " ")
		out = append(out, k)
	}
	return out
}

// TRL's and the alignment-handbook's YAML configs read in one pass: every key TRL defines is
// honoured, noted (one line each: it changes nothing here) or, where ignoring it would change the
// training, refused with the others of the file in one message, each with what to do.
func TestLoad_TRLConfigs(t *testing.T) {
	path, b := trlYAML(t, "example_config.yaml")
	cfg := sft.DefaultConfig()
	notes, err := config.LoadNotes(path, b, cfg)
	if err != nil || len(notes) != 0 || cfg.LearningRate != 1e-4 || cfg.LRSchedulerType != "cosine" || cfg.Dataset != "stanfordnlp/imdb" {
		t.Errorf("TRL's example config: %v, notes %v, %+v", err, notes, cfg.Training)
	}

	path, b = trlYAML(t, "smollm2_sft.yaml")
	_, err = config.LoadNotes(path, b, sft.DefaultConfig())
	want := path + `: 2 keys cannot be honoured: line 8: chat_template: "{% for message in messages %}{{'<|im_sta…": write the template to a file and give it as chat_template_path, or set it in the model's tokenizer_config.json; line 36: push_to_hub: true: posttrain does not upload: push OUTPUT_DIR with huggingface-cli upload`
	if err == nil || err.Error() != want {
		t.Errorf("handbook SFT config:\n got %v\nwant %s", err, want)
	}
	var kept []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "chat_template:") && !strings.HasPrefix(l, "push_to_hub:") {
			kept = append(kept, l)
		}
	}
	cfg = sft.DefaultConfig()
	notes, err = config.LoadNotes(path, []byte(strings.Join(kept, "\n")), cfg)
	if err != nil {
		t.Fatal(err)
	}
	wantNotes := []string{"torch_dtype", "attn_implementation", "dataset_num_proc", "do_eval", "gradient_checkpointing_kwargs",
		"hub_model_id", "hub_strategy", "log_level", "logging_strategy", "remove_unused_columns", "save_strategy"}
	if got := noteKeys(notes); !slices.Equal(got, wantNotes) {
		t.Errorf("notes on %v, want %v\n%s", got, wantNotes, strings.Join(notes, "\n"))
	}
	if cfg.DatasetConfig != "all" || cfg.DatasetTestSplit != "test" || !cfg.BF16 || cfg.MaxLength != 8192 || !cfg.GradientCheckpointing {
		t.Errorf("honoured keys not set: %+v", cfg.Training)
	}

	path, b = trlYAML(t, "grpo_vllm_off.yaml")
	g := grpo.DefaultConfig()
	notes, err = config.LoadNotes(path, b, g)
	if err != nil {
		t.Fatal(err)
	}
	wantNotes = []string{"vllm_mode", "torch_dtype", "attn_implementation", "use_liger_loss", "num_completions_to_print", "save_strategy"}
	if got := noteKeys(notes); !slices.Equal(got, wantNotes) {
		t.Errorf("notes on %v, want %v\n%s", got, wantNotes, strings.Join(notes, "\n"))
	}
	if !slices.Equal(g.RewardFuncs, []string{"think_format_reward"}) || g.MaxCompletionLength != 256 {
		t.Errorf("grpo: %v %d", g.RewardFuncs, g.MaxCompletionLength)
	}

	path, b = trlYAML(t, "refused.yaml")
	_, err = config.LoadNotes(path, b, grpo.DefaultConfig())
	for _, w := range []string{path + ": 5 keys cannot be honoured: line 2: optim: adafactor: posttrain's optimizer is AdamW",
		"; line 3: use_vllm: true: posttrain generates with its own engine", "; line 4: load_in_4bit: true: quantised training (QLoRA) is not implemented",
		"; line 5: neftune_noise_alpha: 5: NEFTune is not implemented", `; line 6: unknown key "lerning_rate" for grpo; did you mean "learning_rate"?`} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("refused keys: %v\nlacks %q", err, w)
		}
	}
}
