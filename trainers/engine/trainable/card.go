package trainable

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// CardName is the model card the final model directory gets, as TRL's trainers write one
// (trainer.create_model_card → README.md).
const CardName = "README.md"

// paper is the method's paper as TRL's model cards cite it (trainer_name, paper_title, paper_id);
// SFT has none.
var papers = map[string]struct{ name, title, id string }{
	"sft":    {"SFT", "", ""},
	"dpo":    {"DPO", "Direct Preference Optimization: Your Language Model is Secretly a Reward Model", "2305.18290"},
	"kto":    {"KTO", "KTO: Model Alignment as Prospect Theoretic Optimization", "2402.01306"},
	"grpo":   {"GRPO", "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models", "2402.03300"},
	"reward": {"Reward", "", ""},
}

// isHubID reports whether s names a Hub repository (owner/name) rather than a local path.
func isHubID(s string) bool {
	if s == "" || filepath.IsAbs(s) || strings.HasPrefix(s, ".") || strings.Count(s, "/") != 1 {
		return false
	}
	_, err := os.Stat(s)
	return err != nil
}

// ModelCard is README.md for the final model: YAML front matter the Hub reads (base_model when the
// model came from the Hub, library_name, model_name, tags, datasets when a Hub dataset), then what
// TRL's lm_model_card.md says (base model, dataset, method and its paper) and what a reader needs
// beyond it: the arguments that shaped the run, its final metrics, how to load the model, and the
// framework versions.
func ModelCard(cfg config.Config, steps int, last runlog.Record) []byte {
	t := cfg.Common()
	p := papers[cfg.Method()]
	name := filepath.Base(filepath.Clean(t.OutputDir))
	front := yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v any) {
		var n yaml.Node
		_ = n.Encode(v) // strings and string lists
		front.Content = append(front.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, &n)
	}
	if isHubID(t.Model) {
		add("base_model", t.Model)
	}
	if isHubID(t.Dataset) {
		add("datasets", []string{t.Dataset})
	}
	add("library_name", "transformers")
	add("model_name", name)
	add("tags", []string{"generated_from_trainer", "posttrain", cfg.Method()})
	fm, _ := yaml.Marshal(&front)

	var b strings.Builder
	fmt.Fprintf(&b, "---\n%s---\n\n# Model Card for %s\n\n", fm, name)
	base := "`" + t.Model + "`"
	if isHubID(t.Model) {
		base = fmt.Sprintf("[%s](https://huggingface.co/%s)", t.Model, t.Model)
	}
	fmt.Fprintf(&b, "This model is a fine-tuned version of %s on `%s`.\n", base, t.Dataset)
	b.WriteString("It has been trained using posttrain, with TRL v0.24's semantics for its method.\n\n")
	if cfg.Method() == "reward" {
		rewardQuickStart(&b, t.OutputDir)
	} else {
		b.WriteString("## Quick start\n\n```python\nfrom transformers import pipeline\n\n")
		fmt.Fprintf(&b, "generator = pipeline(\"text-generation\", model=%q)\n", t.OutputDir)
		b.WriteString("output = generator([{\"role\": \"user\", \"content\": \"What is 3×4?\"}], max_new_tokens=64, return_full_text=False)[0]\nprint(output[\"generated_text\"])\n```\n\n")
		fmt.Fprintf(&b, "or `posttrain generate --model %s --prompt \"What is 3×4?\"`.\n\n", t.OutputDir)
	}
	b.WriteString("## Training procedure\n\n")
	fmt.Fprintf(&b, "This model was trained with %s", p.name)
	if p.id != "" {
		fmt.Fprintf(&b, ", a method introduced in [%s](https://huggingface.co/papers/%s)", p.title, p.id)
	}
	fmt.Fprintf(&b, ", for %d optimizer steps.\n\n", steps)
	b.WriteString("### Training arguments\n\n| argument | value |\n|---|---|\n")
	for _, kv := range cardArgs(cfg) {
		fmt.Fprintf(&b, "| `%s` | %s |\n", kv[0], kv[1])
	}
	if len(last.Metrics) > 0 {
		fmt.Fprintf(&b, "\n### Final metrics (step %d)\n\n| metric | value |\n|---|---|\n", last.Step)
		for _, k := range last.Keys() {
			fmt.Fprintf(&b, "| `%s` | %.6g |\n", k, last.Metrics[k])
		}
	}
	b.WriteString("\n### Framework versions\n\n")
	main, gomlx := buildVersions()
	fmt.Fprintf(&b, "- posttrain: %s\n- GoMLX: %s\n- Go: %s\n", main, gomlx, runtime.Version())
	return []byte(b.String())
}

// cardArgs are the options that shape a run: every trajectory option common to all methods, then
// the method's own options that differ from its defaults, as "key", "value" pairs.
func cardArgs(cfg config.Config) [][2]string {
	def := cfg.Default()
	def.Resolve()
	common := []string{"learning_rate", "lr_scheduler_type", "warmup_ratio", "warmup_steps", "per_device_train_batch_size",
		"gradient_accumulation_steps", "num_train_epochs", "max_steps", "weight_decay", "max_grad_norm", "seed", "bf16"}
	var out [][2]string
	for _, f := range config.Options(cfg) {
		d, _ := config.Option(def, f.Key)
		if slices.Contains(common, f.Key) || (f.Group != "training" && !reflect.DeepEqual(d.Value, f.Value)) {
			out = append(out, [2]string{f.Key, fmt.Sprint(f.Value)})
		}
	}
	return out
}

// buildVersions are the versions of this binary's main module and of GoMLX, from the build info.
func buildVersions() (string, string) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown", "unknown"
	}
	gomlx := "unknown"
	for _, d := range bi.Deps {
		if d.Path == "github.com/gomlx/gomlx" {
			gomlx = d.Version
		}
	}
	return bi.Main.Version, gomlx
}

// rewardQuickStart is the quick start of a reward model: a sequence classifier's one logit.
func rewardQuickStart(b *strings.Builder, dir string) {
	b.WriteString("## Quick start\n\n```python\nfrom transformers import AutoModelForSequenceClassification, AutoTokenizer\n\n")
	fmt.Fprintf(b, "model = AutoModelForSequenceClassification.from_pretrained(%q)\ntokenizer = AutoTokenizer.from_pretrained(%q)\n", dir, dir)
	b.WriteString("ids = tokenizer.apply_chat_template([{\"role\": \"user\", \"content\": \"What is 3×4?\"}, {\"role\": \"assistant\", \"content\": \"12\"}], return_tensors=\"pt\")\nprint(model(ids).logits[0, 0].item())\n```\n\n")
	fmt.Fprintf(b, "or `posttrain score-reward --model %s --dataset PAIRS.jsonl`.\n\n", dir)
}
