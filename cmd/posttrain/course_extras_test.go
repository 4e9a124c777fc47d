package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/trainers"
	"github.com/posttrain/posttrain/trainers/engine/config"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// examplesDir holds the course's TRL extras as posttrain configs (examples/README.md).
const examplesDir = "../../examples"

// The committed examples/course-{dpo,grpo}.jsonl are exactly what `posttrain data mult` writes for
// the extras' make_pairs(512, 0) / make_dataset(512, 0), row for row the rows CPython gives
// (data/mult/testdata, which spaces its JSON as Python's json.dumps does).
func TestCourseExtras_Data(t *testing.T) {
	dir := t.TempDir()
	for _, kind := range []string{"dpo", "grpo"} {
		committed, err := os.ReadFile(filepath.Join(examplesDir, "course-"+kind+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, kind+".jsonl")
		if _, err := runCLI(t, "data", "mult", "--kind", kind, "--n", "512", "--seed", "0", "-o", out); err != nil {
			t.Fatal(err)
		}
		generated, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(committed, generated) {
			t.Errorf("examples/course-%s.jsonl differs from `posttrain data mult --kind %s --n 512 --seed 0`: regenerate it (examples/README.md)", kind, kind)
		}
		python, err := os.ReadFile(filepath.Join("../../data/mult/testdata", "course_"+kind+"_seed0.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		got, want := decodeLines(t, committed), decodeLines(t, python)
		if len(got) != 512 || !reflect.DeepEqual(got, want) {
			t.Errorf("examples/course-%s.jsonl: %d rows, not the %d rows of the extra's Python", kind, len(got), len(want))
		}
	}
}

func decodeLines(t *testing.T, b []byte) []any {
	t.Helper()
	var out []any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var v any
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// courseExtras are the values extras/trl_dpo.py and extras/trl_grpo.py set, as TRL keys.
var courseExtras = map[string]map[string]string{
	"dpo": {
		"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "dataset_name": "examples/course-dpo.jsonl",
		"output_dir": "dpo-out", "beta": "0.1", "per_device_train_batch_size": "8", "learning_rate": "5e-07",
		"max_steps": "100", "logging_steps": "1",
	},
	"grpo": {
		"model_name_or_path": "Qwen/Qwen2.5-0.5B-Instruct", "dataset_name": "examples/course-grpo.jsonl",
		"reward_funcs": "[mult_correct]", "output_dir": "grpo-out", "num_generations": "8",
		"per_device_train_batch_size": "8", "max_completion_length": "32", "learning_rate": "1e-06",
		"beta": "0.04", "epsilon": "0.2", "loss_type": "grpo", "scale_rewards": "group",
		"importance_sampling_level": "token", "max_steps": "200", "logging_steps": "1",
	},
}

// optionValues are a configuration's options by TRL key, formatted with %v.
func optionValues(t *testing.T, cfg config.Config) map[string]string {
	t.Helper()
	out := map[string]string{}
	v := reflect.ValueOf(cfg).Elem()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if f.Anonymous {
				walk(v.Field(i))
				continue
			}
			key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			out[key] = fmt.Sprint(v.Field(i).Interface())
		}
	}
	walk(v)
	return out
}

// loadConfig is a method's defaults with the YAML file at path applied and resolved, as --config does.
func loadConfig(t *testing.T, method, path string) config.Config {
	t.Helper()
	cfg, err := trainers.New(method)
	if err != nil {
		t.Fatal(err)
	}
	if err := config.LoadFile(path, cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Resolve()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// examples/course-{dpo,grpo}.yaml hold the extras' values, and run: two steps each on a tiny
// checkpoint with a (cut-down) Qwen tokenizer, on the first 16 rows of the committed data, leave a
// resolved configuration equal to the file's but for the options given as flags. DPO's step-1 loss
// is ln 2, as the extra's first printed line (the policy is the reference); GRPO's step 1 logs
// loss, grad_norm and kl 0, as the extra's first line.
func TestCourseExtras_Configs(t *testing.T) {
	dir := t.TempDir()
	model := looptest.Model(t)
	for _, method := range []string{"dpo", "grpo"} {
		yamlPath := filepath.Join(examplesDir, "course-"+method+".yaml")
		fromFile := loadConfig(t, method, yamlPath)
		values := optionValues(t, fromFile)
		for k, want := range courseExtras[method] {
			if values[k] != want {
				t.Errorf("%s: %s = %s, the extra sets %s", yamlPath, k, values[k], want)
			}
		}

		committed, err := os.ReadFile(filepath.Join(examplesDir, "course-"+method+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(committed, []byte("\n"))
		small := filepath.Join(dir, method+"-16.jsonl")
		if err := os.WriteFile(small, bytes.Join(lines[:16], nil), 0o644); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, method)
		if _, err := runCLI(t, method, "--config", yamlPath, "--model", model, "--dataset", small,
			"--output-dir", out, "--max-steps", "2"); err != nil {
			t.Fatalf("%s: %v", method, err)
		}

		// The resolved configuration is the file's with the four flags applied.
		want := fromFile.Common()
		want.Model, want.Dataset, want.OutputDir, want.MaxSteps = model, small, out, 2
		resolved := loadConfig(t, method, filepath.Join(out, config.ResolvedName))
		if g, w := optionValues(t, resolved), optionValues(t, fromFile); !reflect.DeepEqual(g, w) {
			for k := range w {
				if g[k] != w[k] {
					t.Errorf("%s: training_args.yaml %s = %s, want %s", method, k, g[k], w[k])
				}
			}
		}

		recs := metricsLines(t, out)
		if len(recs) != 2 || recs[0].Step != 1 || recs[1].Step != 2 {
			t.Fatalf("%s: metrics lines %v, want steps 1 and 2 (logging_steps 1)", method, recs)
		}
		first := recs[0].Metrics
		switch method {
		case "dpo":
			loss := first["loss"]
			if s := fmt.Sprintf("%.4f", loss); s != "0.6931" || float32(loss) != float32(math.Ln2) {
				t.Errorf("dpo step-1 loss %v (%s), want ln 2 = %v in float32", loss, s, float32(math.Ln2))
			}
			if first["rewards/margins"] != 0 || first["rewards/chosen"] != 0 {
				t.Errorf("dpo step-1 rewards %v, want 0 (the policy is the reference)", first)
			}
		case "grpo":
			if kl, ok := first["kl"]; !ok || kl != 0 {
				t.Errorf("grpo step-1 kl %v (logged %v), want 0 with beta 0.04 (the policy is the reference)", kl, ok)
			}
			// As the extra's first printed line: no completion of the prompt is right, so every
			// advantage is 0, and with the KL's gradient 0 at the reference so are loss and grad_norm.
			if first["frac_reward_zero_std"] != 1 || first["loss"] != 0 || first["grad_norm"] != 0 {
				t.Errorf("grpo step 1: frac_reward_zero_std %v, loss %v, grad_norm %v; want 1, 0, 0",
					first["frac_reward_zero_std"], first["loss"], first["grad_norm"])
			}
			if _, ok := first["rewards/mult_correct/mean"]; !ok {
				t.Errorf("grpo metrics lack rewards/mult_correct/mean: %v", first)
			}
		}
	}
}
