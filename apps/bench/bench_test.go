package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// tinyModel is the tiny Qwen2 test checkpoint (158,272 parameters, vocabulary 1024).
const tinyModel = "../../models/testdata/qwen2-tiny/model"

// load loads the tiny checkpoint on the pure-Go backend.
func load(t *testing.T, workload string, dtype dtypes.DType, training bool) *Env {
	t.Helper()
	env, err := Load(context.Background(), LoadOptions{Model: tinyModel, DType: dtype, Backend: backend.PureGo,
		Workload: workload, Training: training})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Close)
	return env
}

// The warm-up passes through the cache lengths of the timed generation (the cache grows from
// one bucket past the prompt, 128 slots after a 64-token prompt, to 256 at slot 128, to 384 at
// slot 256: a 200-token generation's last decode step writes slot 262, a 194-token one's 256).
func TestWarmupNewTokens_KeepsTheCacheLengths(t *testing.T) {
	pureGo := backend.MustNew(backend.PureGo)
	for _, b := range []backends.Backend{nil, pureGo} { // nil: a compiling backend's buckets
		for _, c := range []struct{ plen, n, want int }{{64, 64, 2}, {8, 8, 2}, {5, 4, 2}, {64, 200, 194}, {100, 30, 2}} {
			got := WarmupNewTokens(b, c.plen, c.n)
			pb := generate.PromptBucket(b, c.plen)
			if !slices.Equal(generate.CacheLens(pb, got), generate.CacheLens(pb, c.n)) || (b == nil && got != c.want) {
				t.Errorf("pure Go %v: WarmupNewTokens(%d, %d) = %d, want %d", b != nil, c.plen, c.n, got, c.want)
			}
		}
	}
}

// A training load holds the model as the trainers do: float32 weights, or bfloat16 copies beside
// float32 masters; the JSON says which dtype AdamW updates.
func TestLoad_TrainingKeepsFloat32Masters(t *testing.T) {
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		env := load(t, "sft", dt, true)
		if env.Model == nil || env.Model.DType != dt || env.Info.MasterDType != "float32" || env.Info.DType != map[dtypes.DType]string{
			dtypes.Float32: "float32", dtypes.BFloat16: "bfloat16"}[dt] {
			t.Fatalf("%s: model %+v, info %+v", dt, env.Model, env.Info)
		}
		vars, _, err := env.Model.Params()
		if err != nil {
			t.Fatal(err)
		}
		if got, master := vars[0].Shape().DType, env.Model.Master(vars[0]).Shape().DType; got != dt || master != dtypes.Float32 {
			t.Errorf("%s: weight %s, master %s", dt, got, master)
		}
	}
	if env := load(t, "decode", dtypes.BFloat16, false); env.Model != nil || env.Info.MasterDType != "" {
		t.Errorf("a decode load: model %v, master dtype %q", env.Model, env.Info.MasterDType)
	}
}

// The first SFT loss, before any update, is the mean NLL of the random rows' tokens after the
// first: what `posttrain score` computes for the same rows.
func TestSFT_FirstLossIsTheRowsNLL(t *testing.T) {
	env := load(t, "sft", dtypes.Float32, true)
	p := SFTParams{Batch: 2, SeqLen: 12, Steps: 2, Warmup: 1, LR: 1e-3, Seed: 7}
	res, err := SFT(env, p)
	if err != nil {
		t.Fatal(err)
	}
	ref := load(t, "score", dtypes.Float32, false)
	rows := randomIDs(rand.New(rand.NewPCG(p.Seed, 0x5f7)), ref.Config, p.Batch, p.SeqLen)
	mask := [][]int32{slices.Repeat([]int32{1}, p.SeqLen), slices.Repeat([]int32{1}, p.SeqLen)}
	sc, err := decoder.Score(ref.Backend, ref.Ctx, ref.Config, &decoder.Batch{IDs: rows, Mask: mask}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Losses) != 3 || math.Abs(res.Losses[0]-sc.Loss) > 1e-5 || !(res.Losses[2] < res.Losses[0]) {
		t.Errorf("losses %v: want the first = the rows' NLL %v, then falling", res.Losses, sc.Loss)
	}
	if res.TokensPerStep != 24 || len(res.StepS) != 2 || res.MFU != nil || !(res.TokensPerS > 0) {
		t.Errorf("timing %+v", res.TrainTiming)
	}
}

// With micro-batches of whole groups, the on-policy GRPO loss (ρ = 1) of each update is minus the
// mean of its group's standardised advantages: zero. A group whose rewards differ has a gradient.
func TestGRPO_WholeGroupsHaveZeroLossAndAGradient(t *testing.T) {
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		env := load(t, "grpo", dt, true)
		p := GRPOParams{Prompts: 2, Generations: 4, PromptLen: 5, NewTokens: 6, MicroBatch: 4, Temperature: 1, LR: 1e-3, Seed: 3,
			PeakTFLOPs: 1,
			Reward:     func(ids []int32) float64 { return float64(ids[0] % 3) }} // differs within a group
		res, err := GRPO(env, p)
		if err != nil {
			t.Fatal(err)
		}
		if res.Updates != 2 || len(res.Losses) != 2 || res.TrainTokens != 2*4*(5+6) || res.GeneratedToks != 8*6 {
			t.Fatalf("%s: %d updates, losses %v, %d train tokens, %d generated", dt, res.Updates, res.Losses, res.TrainTokens, res.GeneratedToks)
		}
		for i, l := range res.Losses {
			if math.Abs(l) > 1e-5 || !(res.GradNorms[i] > 0) || math.IsInf(res.GradNorms[i], 0) {
				t.Errorf("%s: update %d: loss %v (want 0), grad norm %v (want > 0)", dt, i, l, res.GradNorms[i])
			}
		}
		if res.TrainMFU == nil || *res.PeakTFLOPs != 1 || res.StepS < res.GenerateS+res.TrainS {
			t.Errorf("%s: mfu %v, step %v = generate %v + reward %v + train %v", dt, res.TrainMFU, res.StepS, res.GenerateS, res.RewardS, res.TrainS)
		}
	}
}

func TestEvenTokenFraction(t *testing.T) {
	if r := EvenTokenFraction([]int32{2, 3, 4, 7}); r != 0.5 {
		t.Errorf("reward %g, want 0.5", r)
	}
	if r := EvenTokenFraction(nil); r != 0 {
		t.Errorf("reward of nothing %g, want 0", r)
	}
}

func TestInputs_Layout(t *testing.T) {
	b := Inputs(50, 4, 16, 4, 3)
	if len(b.InputIDs) != 4 || b.CompletionStart != 4 {
		t.Fatalf("got %d rows, completion_start %d", len(b.InputIDs), b.CompletionStart)
	}
	// Row 0 full, row 1 left-padded by 2, row 2 right-padded by 2, row 3 left-padded by 6.
	for r, want := range [][2]int{{0, 16}, {2, 16}, {0, 14}, {6, 16}} {
		for i, m := range b.AttentionMask[r] {
			if in := i >= want[0] && i < want[1]; (m == 1) != in || (!in && b.InputIDs[r][i] != 0) {
				t.Errorf("row %d position %d: mask %d, id %d", r, i, m, b.InputIDs[r][i])
			}
		}
	}
}

func TestParseInts(t *testing.T) {
	if got, err := ParseInts(" 1, 64,,256"); err != nil || !slices.Equal(got, []int{1, 64, 256}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, s := range []string{"", "0", "a,1", ","} {
		if _, err := ParseInts(s); err == nil {
			t.Errorf("%q: want an error", s)
		}
	}
}
