package config_test

import (
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/sft"
)

// A config is one YAML document: a second one was ignored (its options silently not applied),
// where PyYAML's safe_load, TRL's parser's, refuses it. The error names the line of its marker.
func TestLoad_SecondDocumentRefused(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want string // "" = loads
	}{
		{"learning_rate: 1e-3\n---\nlearning_rate: 5\n", "run.yaml:2: a second YAML document starts here"},
		{"learning_rate: 1e-3\n---\n", "run.yaml:2: a second YAML document starts here"},
		{"---\nlearning_rate: 1e-3\n...\n--- \nmax_steps: 3\n", "run.yaml:4: a second YAML document starts here"},
		{"---\nlearning_rate: 1e-3\n", ""},
		{"learning_rate: 1e-3\n...\n", ""},
		{"", ""},
	} {
		cfg := sft.DefaultConfig()
		err := config.Load("run.yaml", []byte(c.yaml), cfg)
		switch {
		case c.want == "" && (err != nil || cfg.LearningRate != 1e-3 && c.yaml != ""):
			t.Errorf("%q: %v, learning_rate %g; want it loaded", c.yaml, err, cfg.LearningRate)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%q: got %v, want %q…", c.yaml, err, c.want)
		}
	}
}
