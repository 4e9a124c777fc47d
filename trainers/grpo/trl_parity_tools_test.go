package grpo_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/tools"
	"github.com/posttrain/posttrain/models/generate"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/rl"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
	"github.com/posttrain/posttrain/trainers/grpo"
)

const (
	toolsGolden   = "trainers/grpo/testdata/trl1_parity_tools/golden.json"
	toolsRollouts = "trainers/grpo/testdata/trl1_parity_tools/rollouts.json"
	toolsTemplate = "trainers/grpo/testdata/trl1_parity_tools/template.jinja"
)

// A multi-turn GRPO run with the calculator against TRL 1.16's GRPOTrainer with tools=[calculator]
// (scripts/reference/trl1_parity_tools.py): the completions' first turns are scripted (a
// calculator call, a plain answer, a call to an unknown tool, a division by zero; the tiny model
// would not call a tool), the tool turns and the turns after them are posttrain's own; TRL replays
// them, checking that the contexts it continues from (prompt + first turn + its own rendering of
// the tool turn) are posttrain's, runs its own tool loop and trains. Every logged key within 1e-5
// as the other parity tests, tools/call_frequency and tools/failure_frequency included, but for
// TRL 1.x's changed definitions (trl1Differences) and the sampler's metrics (the scripted turns'
// sampled log-probs are not the model's).
func TestGRPO_TRL1ParityTools(t *testing.T) {
	root, record := os.LookupEnv(recordEnv)
	if !record {
		root = looptest.Root(t)
	}
	g := looptest.ReadTRLGoldenIn(t, root, toolsGolden)
	recorded := map[string][]generation{}
	if !record {
		b, err := os.ReadFile(filepath.Join(root, toolsRollouts))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &recorded); err != nil {
			t.Fatalf("%s: %v", toolsRollouts, err)
		}
	}
	tmpl, err := os.ReadFile(filepath.Join(root, toolsTemplate))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]generation{}
	for _, name := range slices.Sorted(maps.Keys(g.Cases)) {
		t.Run(name, func(t *testing.T) {
			cfg := grpo.DefaultConfig()
			c := g.Configure(t, name, cfg)
			cfg.Model, cfg.Dataset = g.ModelDir(t), filepath.Join(root, c.Rows)
			setTemplate(t, cfg.Model, string(tmpl))
			cfg.RewardFuncs = []string{"last_vowels"}
			cfg.Resolve()
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			lastVowels := parityRewards([]float64{1, 1})[0] // the vowels of the text rewards judge: the last turn
			lastVowels.Name = "last_vowels"
			gens, absAdv, recs := trainParity(t, cfg, []grpo.Reward{lastVowels}, withTools(t, cfg))
			got[name] = gens
			calls := 0
			for _, gb := range gens {
				for _, m := range gb.Masks {
					if slices.Contains(m, 0) {
						calls++
					}
				}
			}
			if calls == 0 {
				t.Fatal("no completion ran a tool: the case does not test the multi-turn rollout")
			}
			if record {
				return
			}
			want, ok := recorded[name]
			if !ok {
				t.Fatalf("%s has no case %s: regenerate with %s", toolsRollouts, name, g.Generator)
			}
			if !sameGenerations(t, want, gens) {
				t.Fatalf("posttrain no longer samples the completions TRL was given: regenerate with %s", g.Generator)
			}
			compareGRPO(t, name, c, recs, absAdv, cfg.Beta, func(diff looptest.Differences) {
				trl1Differences(diff)
				for _, k := range []string{rl.SamplingDiffMean, rl.SamplingDiffMax, rl.SamplingOutside} {
					diff[k] = func(testing.TB, int, map[string]float64, map[string]float64) {}
				}
				// posttrain's own: the gap per turn (TRL logs it once); the first turns are scripted
				// here, so only its sign is checked.
				for turn := 1; turn <= 4; turn++ {
					for _, k := range []string{grpo.TurnMetric(turn, "mean"), grpo.TurnMetric(turn, "max")} {
						diff[k] = func(t testing.TB, step int, _, got map[string]float64) {
							if v, ok := got[k]; ok && !(v >= 0) {
								t.Errorf("step %d: %s = %v", step, k, v)
							}
						}
					}
				}
			})
		})
	}
	if record {
		b, err := json.MarshalIndent(got, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, toolsRollouts), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// setTemplate writes template as the chat template of the checkpoint in dir.
func setTemplate(t *testing.T, dir, template string) {
	t.Helper()
	path := filepath.Join(dir, "tokenizer_config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["chat_template"] = template
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// withTools gives a parity run cfg's tools (the built-in calculator) and scripts the first turns
// of its completions, by their index i in the generation batch: i%4 0 calls the calculator on the
// row's a*b, 1 answers without a call, 2 calls an unknown tool, 3 divides by zero.
func withTools(t *testing.T, cfg *grpo.Config) func(*trainable.Model, *grpo.Setup) {
	return func(m *trainable.Model, s *grpo.Setup) {
		set, err := tools.Lookup(cfg.Tools)
		if err != nil {
			t.Fatal(err)
		}
		m.Text.PromptTools = set.Schemas()
		s.Tools = &grpo.Tools{Set: set, Format: tools.Hermes, Suffix: m.Text.ToolSuffix, MaxIterations: cfg.MaxToolCallingIterations}
		_, eos, err := m.Text.EOS()
		if err != nil {
			t.Fatal(err)
		}
		grpo.SetFirstTurns(s, func(prompts []*grpo.Prompt, _ generate.Options) ([]generate.Generation, error) {
			out := make([]generate.Generation, len(prompts))
			for i, p := range prompts {
				a, b := num(p.Columns["a"]), num(p.Columns["b"])
				call := func(name, expr string) string {
					return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": {\"expression\": \"" + expr + "\"}}\n</tool_call>"
				}
				text := []string{call("calculator", a+"*"+b), "Sure.", call("weather", a), "Let me see.\n" + call("calculator", b+"/0")}[i%4]
				var ids []int32
				for _, id := range m.Text.Tokenizer.Encode(text) {
					ids = append(ids, int32(id))
				}
				ids = append(ids, int32(eos))
				out[i] = generate.Generation{IDs: ids, LogProbs: make([]float64, len(ids)), Text: strings.TrimSpace(text)}
			}
			return out, nil
		})
	}
}

// num is a JSON number column's value as text.
func num(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	case int:
		return strconv.Itoa(x)
	case json.Number:
		return x.String()
	}
	return "0"
}
