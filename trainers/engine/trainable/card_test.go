package trainable_test

import (
	"bytes"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/dpo"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/sft"
)

// The model card has the Hub's front matter (base_model and datasets only for Hub ids), the
// method's paper, the arguments that shape the run (the method's only where not default) and the
// final metrics.
func TestModelCard(t *testing.T) {
	c := dpo.DefaultConfig()
	c.Model, c.Dataset, c.OutputDir = "Qwen/Qwen2.5-0.5B-Instruct", "trl-lib/ultrafeedback_binarized", "/runs/dpo-qwen"
	c.Beta = 0.25
	c.Resolve()
	card := trainable.ModelCard(c, 12, runlog.Record{Step: 12, Metrics: map[string]float64{"loss": 0.5, "rewards/margins": 1.25}})
	parts := bytes.SplitN(card, []byte("---\n"), 3)
	if len(parts) != 3 || len(parts[0]) != 0 {
		t.Fatalf("no front matter:\n%s", card)
	}
	var front struct {
		BaseModel   string   `yaml:"base_model"`
		Datasets    []string `yaml:"datasets"`
		LibraryName string   `yaml:"library_name"`
		ModelName   string   `yaml:"model_name"`
		Tags        []string `yaml:"tags"`
	}
	if err := yaml.Unmarshal(parts[1], &front); err != nil {
		t.Fatal(err)
	}
	if front.BaseModel != c.Model || len(front.Datasets) != 1 || front.Datasets[0] != c.Dataset || front.LibraryName != "transformers" ||
		front.ModelName != "dpo-qwen" || strings.Join(front.Tags, ",") != "generated_from_trainer,posttrain,dpo" {
		t.Errorf("front matter %+v", front)
	}
	body := string(parts[2])
	for _, want := range []string{
		"fine-tuned version of [Qwen/Qwen2.5-0.5B-Instruct](https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct)",
		"trained with DPO, a method introduced in [Direct Preference Optimization: Your Language Model is Secretly a Reward Model](https://huggingface.co/papers/2305.18290), for 12 optimizer steps",
		"| `learning_rate` | 1e-06 |", "| `beta` | 0.25 |", "| `loss` | 0.5 |", "| `rewards/margins` | 1.25 |",
		"### Final metrics (step 12)", "- GoMLX: ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("card lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "| `label_smoothing` |") { // a DPO option left at its default
		t.Errorf("card lists a default method option:\n%s", body)
	}

	s := sft.DefaultConfig()
	s.Model, s.Dataset, s.OutputDir = t.TempDir(), "train.jsonl", "out"
	card = trainable.ModelCard(s, 3, runlog.Record{})
	if bytes.Contains(card, []byte("base_model")) || bytes.Contains(card, []byte("datasets:")) || bytes.Contains(card, []byte("papers/")) {
		t.Errorf("a local model and dataset, or SFT, got Hub metadata or a paper:\n%s", card)
	}
}
