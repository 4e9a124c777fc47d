package decoder

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/data/tokenizer"
	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/safetensors"
)

// Save then Load gives the same model: identical log-probs and loss, the same config.
func TestSave_RoundTripLogProbs(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	dir := filepath.Join(t.TempDir(), "ckpt")
	if err := Save(dir, ctx, cfg, SaveOptions{BaseDir: filepath.Join(tinyDir, "model")}); err != nil {
		t.Fatal(err)
	}
	ctx2, cfg2, err := Load(dir, dtypes.Float32)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, cfg2) {
		t.Errorf("config: saved %+v, loaded %+v", cfg, cfg2)
	}
	batch := readInput(t, "left_pad")
	b := backend.SharedForTests()
	want, err := Score(b, ctx, cfg, batch, false)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Score(b, ctx2, cfg2, batch, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.EqualFunc(got.LogProbs, want.LogProbs, slices.Equal) || got.Loss != want.Loss {
		t.Errorf("log-probs after save/load differ: loss %v, want %v", got.Loss, want.Loss)
	}
	var conf map[string]any
	data, _ := os.ReadFile(filepath.Join(dir, ConfigFileName))
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatal(err)
	}
	if conf["transformers_version"] != "4.43.1" || conf["torch_dtype"] != "float32" || conf["eos_token_id"] != 1023.0 {
		t.Errorf("config.json keeps the base's keys and sets torch_dtype, eos_token_id: %v", conf)
	}
	gen, err := ReadGenerationConfig(dir)
	if err != nil || gen == nil || !slices.Equal(gen.EOSTokenIDs, []int{1023}) || gen.BOSTokenID == nil || *gen.BOSTokenID != 1022 {
		t.Errorf("generation_config.json: %+v, %v; want bos 1022, eos [1023]", gen, err)
	}
}

// bf16 storage, sharded: an index and several files, torch_dtype bfloat16, weights rounded to bf16.
func TestSave_BF16Sharded(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	dir := t.TempDir()
	gen := &GenerationConfig{EOSTokenIDs: []int{1023, 5}}
	if err := Save(dir, ctx, cfg, SaveOptions{DType: "bfloat16", MaxShardBytes: 100_000, Generation: gen}); err != nil {
		t.Fatal(err)
	}
	idx, err := safetensors.ReadIndex(filepath.Join(dir, safetensors.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	stored, err := safetensors.ReadModelDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	emb := stored["model.embed_tokens.weight"]
	if len(idx.WeightMap) != len(cfg.Tensors()) || emb.DType != "BF16" {
		t.Fatalf("index maps %d tensors (want %d), embedding stored as %s", len(idx.WeightMap), len(cfg.Tensors()), emb.DType)
	}
	orig, _ := safetensors.ReadModelDir(filepath.Join(tinyDir, "model"))
	want, _ := orig["model.embed_tokens.weight"].Float32s()
	got, _ := emb.Float32s()
	for i := range want {
		if got[i] != safetensors.BF16ToFloat32(safetensors.Float32ToBF16(want[i])) {
			t.Fatalf("embedding[%d] = %v, want bf16(%v)", i, got[i], want[i])
		}
	}
	cfg2, err := ReadConfig(dir)
	if err != nil || cfg2.TorchDType != "bfloat16" {
		t.Errorf("config: %+v, %v; want torch_dtype bfloat16", cfg2, err)
	}
	if ids, err := EOSTokenIDs(dir, cfg2); err != nil || !slices.Equal(ids, []int{1023, 5}) {
		t.Errorf("EOSTokenIDs = %v, %v; want [1023 5] (config then generation_config)", ids, err)
	}
}

func TestSave_CopiesTokenizer(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	dir := t.TempDir()
	if err := Save(dir, ctx, cfg, SaveOptions{TokenizerPath: "../../data/tokenizer/testdata"}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 151669 || tok.Config().EOSToken != "<|im_end|>" {
		t.Errorf("copied tokenizer: vocab %d, eos %q; want 151669, <|im_end|>", tok.VocabSize(), tok.Config().EOSToken)
	}
}

// Save replaces a previous checkpoint it wrote only when told to (Overwrite), never a directory
// that holds something else.
func TestSave_Atomic(t *testing.T) {
	ctx, cfg := loadTiny(t, dtypes.Float32)
	dir := t.TempDir()
	foreign := filepath.Join(dir, "foreign")
	_ = os.MkdirAll(foreign, 0o755)
	_ = os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("keep"), 0o644)
	if err := Save(foreign, ctx, cfg, SaveOptions{Overwrite: true}); err == nil || !strings.Contains(err.Error(), "holds no model posttrain wrote") {
		t.Errorf("save over a foreign directory: got %v, want a refusal", err)
	}
	ckpt := filepath.Join(dir, "ckpt")
	if err := Save(ckpt, ctx, cfg, SaveOptions{DType: "F32"}); err != nil {
		t.Fatal(err)
	}
	if err := Save(ckpt, ctx, cfg, SaveOptions{DType: "F16"}); err == nil || !strings.Contains(err.Error(), "--overwrite") {
		t.Errorf("save over its own checkpoint without Overwrite: got %v, want a refusal naming --overwrite", err)
	}
	if err := Save(ckpt, ctx, cfg, SaveOptions{DType: "F16", Overwrite: true}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("temporary directories left behind: %v", entries)
	}
	if c, err := ReadConfig(ckpt); err != nil || c.TorchDType != "float16" {
		t.Errorf("replaced checkpoint: %+v, %v; want torch_dtype float16", c, err)
	}
	if err := Save(ckpt, ctx, cfg, SaveOptions{DType: "int8"}); err == nil || !strings.Contains(err.Error(), "valid:") {
		t.Errorf("dtype int8: got %v, want an error listing the valid dtypes", err)
	}
}

// A checkpoint made without a base (posttrain init, convert) says which transformers wrote it in
// config.json and generation_config.json, as transformers' save_pretrained does; one with a base
// keeps the base's.
func TestSave_TransformersVersion(t *testing.T) {
	cfg, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := InitCheckpoint(dir, cfg, 1, SaveOptions{DType: "F32"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{ConfigFileName, GenerationConfigFileName} {
		var m map[string]any
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, &m); err != nil {
			t.Fatal(err)
		}
		if m["transformers_version"] != TransformersVersion {
			t.Errorf("%s: transformers_version %v, want %s", name, m["transformers_version"], TransformersVersion)
		}
	}
}
