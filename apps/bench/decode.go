package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// DecodeRun is one batch size of the decode workload.
type DecodeRun struct {
	Batch     int     `json:"batch"`
	Rows      int     `json:"rows"` // compiled batch bucket
	PromptLen int     `json:"prompt_len"`
	NewTokens int     `json:"new_tokens"`
	CacheLen  int     `json:"cache_len"`
	WarmupS   float64 `json:"warmup_s"` // first call of these shapes: compilation included
	// TimedCompiles are the graphs compiled during the timed generation: 0 unless it recompiles.
	TimedCompiles int     `json:"timed_compiles"`
	PrefillS      float64 `json:"prefill_s"`
	DecodeS       float64 `json:"decode_s"`
	TotalS        float64 `json:"total_s"`
	Tokens        int     `json:"tokens"`
	// StepsPerCall is generate.Options.StepsPerCall; DecodeCalls the decode graph's executions.
	StepsPerCall int `json:"decode_steps_per_call"`
	DecodeCalls  int `json:"decode_calls"`
	// TokensPerSecond counts every generated token over prefill + decode; DecodeTokensPerSecond
	// the tokens of the decode steps (all but the first of each row) over the decode time.
	TokensPerSecond       float64 `json:"tokens_per_second"`
	DecodeTokensPerSecond float64 `json:"decode_tokens_per_second"`
	// StepSeconds is the mean wall time of a decode step; First64StepSeconds that of the first 64
	// (all, when fewer): with the whole cache read or copied at every step, a step costs as much at
	// the start of a long generation as at its end.
	StepSeconds        float64 `json:"step_seconds"`
	First64StepSeconds float64 `json:"first64_step_seconds"`
	// HostSecondsPerStep is the mean time per decode step outside the step's execution (the
	// host's work between steps: bookkeeping, building the inputs).
	HostSecondsPerStep float64 `json:"host_seconds_per_step"`
	// CacheCopyOps counts the copies of KV-cache-shaped buffers in the optimised decode step (XLA
	// backends: read from XLA's HLO dump); null elsewhere.
	CacheCopyOps *int `json:"cache_copy_ops"`
	// BytesAccessedPerStep is the mean over the decode steps of XLA's cost analysis of the step's
	// graph, "bytes accessed" (what one step reads and writes, by XLA's estimate; the cache's
	// graph grows with the rows); null on the pure-Go backend.
	BytesAccessedPerStep *float64 `json:"bytes_accessed_per_step"`
	// Memory is XLA's memory plan of the decode step (null on the pure-Go backend).
	Memory *MemoryPlan `json:"decode_memory,omitempty"`
}

// MemoryPlan is XLA's buffer assignment of one executable, in bytes: its arguments, its outputs,
// the part of the outputs written in place into donated arguments, its temporaries and its
// generated code.
type MemoryPlan struct {
	ArgumentBytes int64 `json:"argument_bytes"`
	OutputBytes   int64 `json:"output_bytes"`
	AliasBytes    int64 `json:"alias_bytes"`
	TempBytes     int64 `json:"temp_bytes"`
	CodeBytes     int64 `json:"generated_code_bytes"`
}

func memoryPlan(m backends.CompiledMemoryStats) *MemoryPlan {
	return &MemoryPlan{ArgumentBytes: m.Arguments, OutputBytes: m.Outputs, AliasBytes: m.Aliases, TempBytes: m.Temporary, CodeBytes: m.GeneratedCode}
}

// DecodeResult is the decode workload's output.
type DecodeResult struct {
	Info
	Runs []DecodeRun `json:"runs"`
}

// DecodeParams are the decode workload's settings.
type DecodeParams struct {
	Batches              []int // batch sizes, one run each
	PromptLen, NewTokens int   // per row; EOS is ignored
	Seed                 uint64
	StepsPerCall         int // generate.Options.StepsPerCall
	// HLODir is where XLA dumps its optimised modules (LoadOptions.DumpHLO); "" leaves
	// CacheCopyOps null.
	HLODir string
}

// DumpDir is where the command asks XLA to dump its modules (HLODir).
func (p *DecodeParams) DumpDir() *string { return &p.HLODir }

// WarmupNewTokens is the fewest new tokens (≥ 2: one prefill and one decode step) whose
// generation on backend b compiles every shape one of newTok does: it ends with the same cache
// length and passes through the same lengths as the cache grows (generate.CacheLens), so that the
// timed generation compiles nothing.
func WarmupNewTokens(b backends.Backend, plen, newTok int) int {
	pb := generate.PromptBucket(b, plen)
	want := generate.CacheLens(pb, newTok)
	for n := 2; n < newTok; n++ {
		if slices.Equal(generate.CacheLens(pb, n), want) {
			return n
		}
	}
	return newTok
}

// Decode times batched greedy decoding with the KV cache (the generator the trainers sample with),
// each batch size after a warm-up on its shapes.
func Decode(env *Env, p DecodeParams) (*DecodeResult, error) {
	rng := rand.New(rand.NewPCG(p.Seed, 0xdec0de))
	gen := generate.NewGenerator(env.Backend, env.Ctx, decoder.Arch{Config: env.Config})
	gen.CostAnalysis = true // bytes_accessed_per_step
	defer gen.Finalize()
	res := &DecodeResult{Info: env.Info}
	for _, bs := range p.Batches {
		prompts := randomIDs(rng, env.Config, bs, p.PromptLen)
		warmup := WarmupNewTokens(env.Backend, p.PromptLen, p.NewTokens)
		if p.StepsPerCall > 1 {
			// The multi-step graph runs at every cache length but where its steps fall short
			// of the end: the whole generation compiles what the timed one will.
			warmup = p.NewTokens
		}
		opts := generate.Options{MaxNewTokens: warmup, IgnoreEOS: true, Seed: p.Seed, StepsPerCall: p.StepsPerCall}
		t0 := time.Now()
		if _, err := gen.Generate(prompts, opts); err != nil {
			return nil, fmt.Errorf("batch %d warm-up: %w", bs, err)
		}
		warm := time.Since(t0)
		opts.MaxNewTokens = p.NewTokens
		c0 := backend.Compiled()
		t0 = time.Now()
		gens, err := gen.Generate(prompts, opts)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", bs, err)
		}
		total := time.Since(t0)
		st := gen.Stats()
		run := DecodeRun{Batch: bs, Rows: st.Rows, PromptLen: p.PromptLen, NewTokens: p.NewTokens, CacheLen: st.CacheLen,
			StepsPerCall: max(1, p.StepsPerCall), DecodeCalls: st.DecodeCalls,
			WarmupS: warm.Seconds(), TimedCompiles: backend.Compiled().Graphs - c0.Graphs, PrefillS: st.Prefill.Seconds(), DecodeS: st.Decode.Seconds(), TotalS: total.Seconds()}
		for _, g := range gens {
			run.Tokens += len(g.IDs)
		}
		run.TokensPerSecond = float64(run.Tokens) / total.Seconds()
		if st.Decode > 0 {
			run.DecodeTokensPerSecond = float64(run.Tokens-len(gens)) / st.Decode.Seconds()
		}
		if n := len(st.DecodeStepTimes); n > 0 {
			run.StepSeconds = meanSeconds(st.DecodeStepTimes)
			run.First64StepSeconds = meanSeconds(st.DecodeStepTimes[:min(n, 64)])
			run.HostSecondsPerStep = (st.Decode - st.DecodeExec).Seconds() / float64(n)
		}
		if m := st.DecodeMemory; m != nil {
			run.Memory = memoryPlan(*m)
		}
		if st.DecodeCostSteps > 0 {
			b := st.DecodeBytesAccessed / float64(st.DecodeCostSteps)
			run.BytesAccessedPerStep = &b
		}
		if p.HLODir != "" && backend.IsXLA(env.Info.Backend) {
			cache := []int{st.Rows, env.Config.NumKeyValueHeads, st.CacheLen, env.Config.HeadDim}
			n, err := CacheCopyOps(p.HLODir, hloType(env.DType), cache)
			if err != nil {
				return nil, fmt.Errorf("batch %d: %w", bs, err)
			}
			run.CacheCopyOps = &n
		}
		env.logf("decode batch %d: %d tokens in %.2fs (%.0f tokens/s; %.1f ms/step, %.2f ms host; warm-up %.1fs)", bs, run.Tokens, run.TotalS,
			run.TokensPerSecond, 1e3*run.StepSeconds, 1e3*run.HostSecondsPerStep, run.WarmupS)
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

func meanSeconds(ds []time.Duration) float64 {
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	return sum.Seconds() / float64(len(ds))
}

// hloType is a dtype as HLO text writes it.
func hloType(d dtypes.DType) string {
	if d == dtypes.BFloat16 {
		return "bf16"
	}
	return "f32"
}

// hloInstr matches an HLO text instruction's result shape and opcode: "%copy.3 = f32[16,4,256,64]{3,2,1,0} copy(…".
var hloInstr = regexp.MustCompile(`=\s*(\w+)\[([\d,]*)\](?:\{[^}]*\})?\s+([\w-]+)\(`)

// CacheCopyOps reads the optimised modules XLA dumped in dir (*after_optimizations.txt) and
// returns, for the newest decode step among them (the module with a parameter of the KV cache's
// type dtype[cache...]), its copy instructions whose result has that type: XLA's copies of a
// whole cache. 0 means the step updates the cache in place.
func CacheCopyOps(dir, dtype string, cache []int) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*after_optimizations.txt"))
	if err != nil {
		return 0, err
	}
	want := dtype + "[" + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(cache)), ","), "[]") + "]"
	var newest []byte // the newest decode step's text
	var newestTime time.Time
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || (newest != nil && !st.ModTime().After(newestTime)) {
			continue // older than the decode step found
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		for _, m := range hloInstr.FindAllStringSubmatch(string(b), -1) {
			if m[3] == "parameter" && m[1]+"["+m[2]+"]" == want {
				newest, newestTime = b, st.ModTime()
				break
			}
		}
	}
	if newest == nil {
		return 0, fmt.Errorf("no decode step with a %s parameter among the %d modules XLA dumped in %s", want, len(files), dir)
	}
	n := 0
	for _, m := range hloInstr.FindAllStringSubmatch(string(newest), -1) {
		if m[3] == "copy" && m[1]+"["+m[2]+"]" == want {
			n++
		}
	}
	return n, nil
}
