package decoder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/safetensors"
)

// *ForSequenceClassification reads the rightmost token that is not pad_token_id: with pad = eos a
// trailing EOS is skipped; padding (mask 0) never counts; a row of pads only gives 0.
func TestLastNonPad(t *testing.T) {
	pad := 9
	ids := [][]int32{{5, 6, 7, 0, 0}, {5, 6, 9, 0, 0}, {9, 9, 0, 0, 0}, {1, 2, 3, 4, 5}, {0, 0, 4, 5, 9}}
	mask := [][]int32{{1, 1, 1, 0, 0}, {1, 1, 1, 0, 0}, {1, 1, 0, 0, 0}, {1, 1, 1, 1, 1}, {0, 0, 1, 1, 1}}
	if got, want := LastNonPad(ids, mask, &pad), []int32{2, 1, 0, 4, 3}; !slices.Equal(got, want) {
		t.Errorf("LastNonPad(pad 9) = %v, want %v", got, want)
	}
	if got, want := LastNonPad(ids, mask, nil), []int32{2, 2, 1, 4, 4}; !slices.Equal(got, want) {
		t.Errorf("LastNonPad(no pad id) = %v, want %v", got, want)
	}
}

// rewardsOf runs Rewards on right-padded rows (padded with id 0) under ctx.
func rewardsOf(t *testing.T, ctx *context.Context, cfg *Config, rows [][]int32, width int) []float32 {
	t.Helper()
	ids, mask := make([][]int32, len(rows)), make([][]int32, len(rows))
	for i, r := range rows {
		ids[i], mask[i] = make([]int32, width), make([]int32, width)
		copy(ids[i], r)
		for j := range r {
			mask[i][j] = 1
		}
	}
	last := LastNonPad(ids, mask, cfg.PadTokenID)
	exec, err := context.NewExec(backend.SharedForTests(), ctx.Reuse(), func(ctx *context.Context, ids, pos, mask, last *Node) *Node {
		return Rewards(ctx, cfg, ids, pos, mask, last)
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec(ids, PositionIDs(mask), mask, last)
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0])
}

// A causal LM loads as a classifier as AutoModelForSequenceClassification.from_pretrained(num_labels=1)
// does (no LM head, a new score head [1, hidden] ~ N(0, initializer_range²)); saved, it is an HF
// classification checkpoint (architectures, id2label/label2id, pad_token_id, score.weight, no
// lm_head) that loads back to the same config and the same rewards. A row's reward does not
// depend on its padding or its batch, and is the score head applied to its last non-pad token.
func TestClassifier_FromCausalLMSaveLoad(t *testing.T) {
	for _, fixture := range []string{"qwen2-tiny", "llama-tiny"} {
		t.Run(fixture, func(t *testing.T) {
			src := filepath.Join("../testdata", fixture, "model")
			ctx, cfg, fresh, err := LoadClassifier(src, dtypes.Float32, 1, 7)
			if err != nil {
				t.Fatal(err)
			}
			if !fresh || cfg.NumLabels != 1 {
				t.Fatalf("a causal LM: fresh %v, num_labels %d; want a new head, 1", fresh, cfg.NumLabels)
			}
			pad := 3
			cfg.PadTokenID = &pad
			rows := [][]int32{{5, 6, 7, 8}, {5, 6, 3}, {11, 12, 13, 14, 15, 16}}
			got := rewardsOf(t, ctx, cfg, rows, 8)
			for i, r := range rows {
				alone := rewardsOf(t, ctx, cfg, [][]int32{r[:len(r)-1+boolInt(r[len(r)-1] != 3)]}, len(r))
				if diff := got[i] - alone[0]; diff > 1e-5 || diff < -1e-5 {
					t.Errorf("row %d: reward %v in a padded batch, %v alone (its pad-token end cut off), want equal", i, got[i], alone[0])
				}
			}
			dir := filepath.Join(t.TempDir(), "rm")
			if err := Save(dir, ctx, cfg, SaveOptions{BaseDir: src}); err != nil {
				t.Fatal(err)
			}
			var conf map[string]any
			data, _ := os.ReadFile(filepath.Join(dir, ConfigFileName))
			if err := json.Unmarshal(data, &conf); err != nil {
				t.Fatal(err)
			}
			wantArch := []any{cfg.ClassifierArchitecture()}
			if !reflect.DeepEqual(conf["architectures"], wantArch) || !reflect.DeepEqual(conf["id2label"], map[string]any{"0": "LABEL_0"}) ||
				!reflect.DeepEqual(conf["label2id"], map[string]any{"LABEL_0": 0.0}) || conf["pad_token_id"] != 3.0 {
				t.Errorf("config.json: architectures %v, id2label %v, label2id %v, pad_token_id %v", conf["architectures"], conf["id2label"], conf["label2id"], conf["pad_token_id"])
			}
			stored, err := safetensors.ReadModelDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			if s := stored[ScoreWeight]; s == nil || !slices.Equal(s.Shape, []int{1, cfg.HiddenSize}) || stored["lm_head.weight"] != nil {
				t.Errorf("weights: score.weight %v, lm_head.weight present %v; want [1, %d] and absent", s, stored["lm_head.weight"] != nil, cfg.HiddenSize)
			}
			ctx2, cfg2, fresh2, err := LoadClassifier(dir, dtypes.Float32, 1, 99)
			if err != nil {
				t.Fatal(err)
			}
			if fresh2 || !reflect.DeepEqual(cfg, cfg2) {
				t.Errorf("reloaded: fresh %v, config %+v; want the saved head and %+v", fresh2, cfg2, cfg)
			}
			if again := rewardsOf(t, ctx2, cfg2, rows, 8); !slices.Equal(again, got) {
				t.Errorf("rewards after save/load %v, want %v", again, got)
			}
			if _, _, _, err := LoadClassifier(dir, dtypes.Float32, 2, 0); err == nil {
				t.Error("loading a num_labels 1 checkpoint with num_labels 2: no error")
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The classification class of each family is transformers' name for its text model:
// Gemma 3's is Gemma3TextForSequenceClassification (Gemma3ForSequenceClassification is the
// multimodal model's).
func TestClassifierArchitecture_Families(t *testing.T) {
	for modelType, want := range map[string]string{
		"qwen2": "Qwen2ForSequenceClassification", "qwen3": "Qwen3ForSequenceClassification",
		"llama": "LlamaForSequenceClassification", "smollm3": "SmolLM3ForSequenceClassification",
		"gemma3_text": "Gemma3TextForSequenceClassification",
	} {
		if got := (&Config{ModelType: modelType}).ClassifierArchitecture(); got != want {
			t.Errorf("%s: %s, want %s", modelType, got, want)
		}
	}
}
