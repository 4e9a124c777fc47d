package bench

import (
	"context"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/lora"
)

func loadLoRA(tb testing.TB, dtype dtypes.DType, c *lora.Config) *Env {
	tb.Helper()
	env, err := Load(context.Background(), LoadOptions{Model: tinyModel, DType: dtype, Backend: backend.PureGo,
		Workload: "sft", Training: true, LoRA: c})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(env.Close)
	return env
}

// The sft workload with an adapter trains r·(in + out) parameters per adapted layer, holds less
// state than full fine-tuning (no gradients, moments or masters for the base), counts 4·N
// FLOPs per token, and its loss falls.
func TestSFT_LoRAState(t *testing.T) {
	p := SFTParams{Batch: 2, SeqLen: 16, Steps: 3, Warmup: 1, LR: 1e-2, Seed: 1}
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
		full, err := SFT(loadLoRA(t, dt, nil), p)
		if err != nil {
			t.Fatal(err)
		}
		env := loadLoRA(t, dt, &lora.Config{R: 8, Alpha: 16, TargetModules: []string{"q_proj", "v_proj"}})
		res, err := SFT(env, p)
		if err != nil {
			t.Fatal(err)
		}
		// qwen2-tiny: hidden 64, kv 2×16, 2 layers: q (64→64) and v (64→32) per layer.
		want := 2 * 8 * ((64 + 64) + (64 + 32))
		if res.TrainableParams != want || full.TrainableParams != res.Params {
			t.Errorf("%s: trainable %d (want %d), full %d (want %d)", dt, res.TrainableParams, want, full.TrainableParams, res.Params)
		}
		if !(res.StateBytes < full.StateBytes/2) || res.PEFT == nil || res.FLOPsPerToken != 4*float64(res.Params) {
			t.Errorf("%s: state %d bytes with LoRA, %d without; info %+v", dt, res.StateBytes, full.StateBytes, res.Info)
		}
		if l := res.Losses; !(l[len(l)-1] < l[0]) {
			t.Errorf("%s: losses %v do not fall", dt, l)
		}
	}
}

// BenchmarkSFT_LoRAvsFull times SFT steps on the tiny checkpoint with every weight trained and with
// a LoRA adapter on every linear layer (r 16), reporting the step time, the trainable parameters,
// the state bytes and the peak RSS of each (posttrain bench sft --use-peft measures a real model).
func BenchmarkSFT_LoRAvsFull(b *testing.B) {
	for _, c := range []struct {
		name string
		lora *lora.Config
	}{{"full", nil}, {"lora-r16-all-linear", &lora.Config{R: 16, Alpha: 32, TargetModules: []string{lora.AllLinear}}}} {
		b.Run(c.name, func(b *testing.B) {
			ResetPeakRSS()
			for b.Loop() {
				res, err := SFT(loadLoRA(b, dtypes.Float32, c.lora), SFTParams{Batch: 4, SeqLen: 64, Steps: 2, Warmup: 1, LR: 1e-3, Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.MeanStepS, "s/step")
				b.ReportMetric(float64(res.TrainableParams), "trainable")
				b.ReportMetric(float64(res.StateBytes)/1e6, "state-MB")
				b.ReportMetric(float64(res.PeakRSSBytes)/1e6, "peak-RSS-MB")
			}
		})
	}
}
