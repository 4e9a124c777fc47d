// Package bench is the measurement harness behind the hidden `posttrain bench` commands that
// scripts/gpu-check.sh runs. Each workload runs on synthetic data with a checkpoint and returns a
// typed result, which the command prints as one JSON object (progress goes to a log writer):
//
//	Backend   the PJRT plugin and API versions, a client, its devices, one small graph
//	Inputs    a scoring batch in the qwen2-tiny input format (left- and right-padded rows)
//	Decode    batched greedy decoding with the KV cache: tokens/s per batch size
//	SFT       SFT optimizer steps on rows × seq-len tokens: step time, tokens/s, MFU against 6·N
//	GRPO      one GRPO step: sample prompts × generations completions, a reward, group
//	          advantages, clipped-surrogate updates on micro-batches
//	Sample    every sampler variant on a backend and on the pure-Go one, tokens compared
//	Parity    the training loop's AdamW steps on one batch, to compare with PyTorch
//
// BuildReport gathers a gpu-check run's stage records (these results, `posttrain score`'s, the
// PyTorch side's from scripts/gpu/hf_reference.py, which writes the same keys, and the trainers'
// metrics) into report.json, decoding each stage's JSON into its result type, and PrintSummary
// writes summary.txt.
//
// The package holds no training math of its own: SFT and GRPO time the trainers' code paths
// (sft.Trainer's Batch and Loss, grpo's micro-batch loss graph, loop.Optimizer with its float32
// master weights under bfloat16, rl.TRLAdvantages, the qwen2 generator); a workload only passes in
// what it varies (the synthetic reward, EOS ignored while generating). The first call of every
// compiled shape is a warm-up (compilation) and is reported apart.
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/hub"
	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Info is the common header of every model workload's JSON.
type Info struct {
	Workload    string  `json:"workload"`
	Backend     string  `json:"backend"`
	BackendDesc string  `json:"backend_description"`
	DType       string  `json:"dtype"` // compute dtype of weights and activations
	Params      int     `json:"params"`
	Layers      int     `json:"layers"`
	Hidden      int     `json:"hidden"`
	Vocab       int     `json:"vocab"`
	LoadS       float64 `json:"load_s"`
	// FLOPsPerToken is 6·N, the training cost per token (forward 2N, backward 4N), N = Params.
	FLOPsPerToken float64 `json:"flops_per_token"`
	// MasterDType is the dtype of the weights AdamW updates and of its moments in the training
	// workloads (sft, grpo, parity): float32, as in posttrain's trainers (under bfloat16 compute
	// they are float32 master weights beside the bfloat16 copies the graphs read). Absent from
	// the other workloads, and from the PyTorch side's output, whose AdamW keeps weights and
	// moments in the compute dtype.
	MasterDType string `json:"master_dtype,omitempty"`
	// PEFT is the LoRA adapter a training workload trains instead of every weight (the base
	// frozen, without masters under bfloat16); FLOPsPerToken is then 4·N: the forward pass and
	// the backward pass's input gradients, without the frozen weights' gradients (≈ 2N).
	PEFT *PEFTInfo `json:"peft,omitempty"`
}

// Env is a loaded model on a backend.
type Env struct {
	Dir     string       // the checkpoint directory
	DType   dtypes.DType // compute dtype of weights and activations
	Ctx     *mlctx.Context
	Config  *decoder.Config
	Backend backends.Backend
	Info    Info
	// Model is the model as the trainers hold it (LoadOptions.Training): trainable.Model, whose
	// context is Ctx, with float32 master weights under bfloat16. Nil otherwise.
	Model *trainable.Model
	log   io.Writer
	tmp   string // a preset's temporary checkpoint, removed by Close
}

// LoadOptions say what Load loads.
type LoadOptions struct {
	Model string // checkpoint directory or HuggingFace repo id
	// Preset, instead of Model, is a model shape (decoder.PresetNames) with random weights (seed 1),
	// written to a temporary directory that Close removes: nothing is downloaded or kept.
	Preset string
	// DumpHLO, for an XLA backend, is a directory where XLA writes every compiled module's
	// optimised HLO as text (XLA_FLAGS --xla_dump_to, set before the client is created), which
	// CacheCopyOps reads.
	DumpHLO  string
	DType    dtypes.DType // compute dtype
	Backend  string       // backend configuration ("" = $GOMLX_BACKEND, else the default)
	Workload string       // the JSON's "workload"
	// Training loads the model as the trainers do (trainable.Model: float32 weights, switched to
	// bfloat16 compute with float32 masters when DType is bfloat16) for an optimizer.
	Training bool
	// LoRA, with Training, attaches a new LoRA adapter (seed 1) and trains only it.
	LoRA *lora.Config
	Log  io.Writer // progress lines; nil discards them
}

// Load resolves the checkpoint, reads its weights and creates the backend. Close releases it.
func Load(ctx context.Context, o LoadOptions) (*Env, error) {
	t0 := time.Now()
	var dir, tmp string
	var err error
	if o.Preset != "" {
		if tmp, dir, err = presetCheckpoint(o.Preset, o.DType); err != nil {
			return nil, err
		}
		o.Model = "preset " + o.Preset
	} else if dir, err = hub.Resolve(ctx, o.Model, hub.Options{}); err != nil {
		return nil, err
	}
	env, err := loadDir(o, dir, t0)
	if err != nil {
		if tmp != "" {
			os.RemoveAll(tmp)
		}
		return nil, err
	}
	env.tmp = tmp
	return env, nil
}

// presetCheckpoint writes a checkpoint of preset's shape with random weights (seed 1) in the
// stored dtype of dtype to a new temporary directory tmp; dir is the checkpoint in it.
func presetCheckpoint(preset string, dtype dtypes.DType) (tmp, dir string, err error) {
	cfg, err := decoder.Preset(preset)
	if err != nil {
		return "", "", err
	}
	if tmp, err = os.MkdirTemp("", "posttrain-bench-"); err != nil {
		return "", "", err
	}
	dir = filepath.Join(tmp, preset)
	stored := "F32"
	if dtype == dtypes.BFloat16 {
		stored = "BF16"
	}
	if err = decoder.InitCheckpoint(dir, cfg, 1, decoder.SaveOptions{DType: stored, WrittenBy: "posttrain bench"}); err != nil {
		os.RemoveAll(tmp)
		return "", "", err
	}
	return tmp, dir, nil
}

// loadDir reads the checkpoint at dir and creates the backend.
func loadDir(o LoadOptions, dir string, t0 time.Time) (*Env, error) {
	if o.DumpHLO != "" && backend.IsXLA(backend.Resolve(o.Backend)) {
		flags := strings.TrimSpace(os.Getenv("XLA_FLAGS") + " --xla_dump_to=" + o.DumpHLO + " --xla_dump_hlo_as_text")
		os.Setenv("XLA_FLAGS", flags)
	}
	loadAs := o.DType
	if o.Training {
		loadAs = dtypes.Float32
	}
	mctx, cfg, err := decoder.Load(dir, loadAs)
	if err != nil {
		return nil, err
	}
	env := &Env{Dir: dir, DType: o.DType, Ctx: mctx, Config: cfg, log: o.Log}
	if env.log == nil {
		env.log = io.Discard
	}
	if o.Training {
		env.Model = &trainable.Model{Dir: dir, Config: cfg, Ctx: mctx, DType: dtypes.Float32}
		if o.LoRA != nil {
			if err := env.Model.AttachAdapter(*o.LoRA, 1); err != nil {
				return nil, err
			}
		}
		if o.DType == dtypes.BFloat16 {
			if err := env.Model.ToBF16(); err != nil {
				return nil, err
			}
		}
	}
	cfgName := backend.Resolve(o.Backend)
	if env.Backend, err = backend.New(cfgName); err != nil {
		return nil, err
	}
	n := cfg.NumParameters()
	env.Info = Info{Workload: o.Workload, Backend: cfgName, BackendDesc: env.Backend.Description(),
		DType: strings.ToLower(o.DType.String()), Params: n, Layers: cfg.NumHiddenLayers, Hidden: cfg.HiddenSize,
		Vocab: cfg.VocabSize, LoadS: time.Since(t0).Seconds(), FLOPsPerToken: 6 * float64(n)}
	if o.Training {
		env.Info.MasterDType = "float32"
		if env.Info.PEFT = peftInfo(o.LoRA, env.Model.Adapter); env.Info.PEFT != nil {
			env.Info.FLOPsPerToken = 4 * float64(n)
		}
	}
	env.logf("%s: %s, %d parameters, %s on %s (loaded in %.1fs)", o.Workload, o.Model, n, o.DType, cfgName, env.Info.LoadS)
	return env, nil
}

// Close releases the backend and removes a preset's temporary checkpoint.
func (e *Env) Close() {
	e.Backend.Finalize()
	if e.tmp != "" {
		os.RemoveAll(e.tmp)
	}
}

func (e *Env) logf(format string, args ...any) { logf(e.log, format, args...) }

func logf(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, "bench: "+format+"\n", args...)
	}
}

// WriteJSON writes v as indented JSON (a workload's output).
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// WriteJSONLine writes v as JSON on one line (--json: one record per line, for scripts).
func WriteJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// MaxListInt bounds each entry of ParseInts, as every integer flag is bounded (2²⁴).
const MaxListInt = 1 << 24

// ParseInts reads a comma-separated list of positive integers, each at most MaxListInt.
func ParseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		if n > MaxListInt {
			return nil, fmt.Errorf("%d is more than %d", n, MaxListInt)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("empty list")
	}
	return out, nil
}

// randomIDs draws rows × n token ids uniformly from the vocabulary, avoiding the stop ids so that a
// prompt never contains an end of sequence.
func randomIDs(rng *rand.Rand, cfg *decoder.Config, rows, n int) [][]int32 {
	out := make([][]int32, rows)
	for r := range out {
		out[r] = make([]int32, n)
		for t := range out[r] {
			id := rng.IntN(cfg.VocabSize)
			for slices.Contains(cfg.EOSTokenIDs, id) {
				id = rng.IntN(cfg.VocabSize)
			}
			out[r][t] = int32(id)
		}
	}
	return out
}

// Batch is a scoring batch in the qwen2-tiny input format (what `posttrain score` and
// hf_reference.py score read).
type Batch struct {
	InputIDs        [][]int32 `json:"input_ids"`
	AttentionMask   [][]int32 `json:"attention_mask"`
	CompletionStart int       `json:"completion_start"`
}

// Inputs lays out rows of n random ids from [0, vocab): row 0 full, odd rows left-padded by n/8·row,
// other even rows right-padded by n/8; pads hold id 0. start is the first scored position.
func Inputs(vocab, rows, n, start int, seed uint64) Batch {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	out := Batch{CompletionStart: start}
	for r := range rows {
		ids, mask := make([]int32, n), make([]int32, n)
		lo, hi := 0, n
		switch {
		case r == 0:
		case r%2 == 1:
			lo = min(n/2, n/8*r)
		default:
			hi = n - n/8
		}
		for t := lo; t < hi; t++ {
			ids[t], mask[t] = int32(rng.IntN(vocab)), 1
		}
		out.InputIDs, out.AttentionMask = append(out.InputIDs, ids), append(out.AttentionMask, mask)
	}
	return out
}
