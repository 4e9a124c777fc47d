package tinylmgomlx

import (
	"testing"

	"github.com/posttrain/posttrain/toy/tinylm"
)

// BenchmarkExperiments times each TinyLM experiment at the course's defaults through the GoMLX
// trainer path and through the float64 oracle (`make bench` runs each once).
func BenchmarkExperiments(b *testing.B) {
	be := testBackend()
	grpo12 := tinylm.DefaultGRPO()
	grpo12.Iterations = tinylm.Phase12Iterations
	for _, e := range []struct {
		name          string
		gomlx, oracle func() error
	}{
		{"lm-reinforce", func() error {
			for _, beta := range tinylm.Phase8Betas {
				if _, err := RunReinforceKL(be, tinylm.DefaultReinforceKL(beta)); err != nil {
					return err
				}
			}
			return nil
		}, func() error { tinylm.RunPhase8(); return nil }},
		{"rlhf", func() error { _, err := RunRLHF(be, tinylm.DefaultRLHF()); return err },
			func() error { tinylm.RunRLHF(tinylm.DefaultRLHF()); return nil }},
		{"dpo", func() error { _, err := RunDPO(be, tinylm.DefaultDPO()); return err },
			func() error { tinylm.RunDPO(tinylm.DefaultDPO()); return nil }},
		{"kto", func() error { _, err := RunKTO(be, tinylm.DefaultKTO()); return err },
			func() error { tinylm.RunKTO(tinylm.DefaultKTO()); return nil }},
		{"grpo", func() error { _, err := RunGRPO(be, tinylm.DefaultGRPO()); return err },
			func() error { tinylm.RunGRPO(tinylm.DefaultGRPO()); return nil }},
		{"variants", func() error { _, err := RunVariants(be, grpo12); return err },
			func() error { tinylm.RunPhase12(); return nil }},
	} {
		b.Run(e.name+"/gomlx", func(b *testing.B) {
			for b.Loop() {
				if err := e.gomlx(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(e.name+"/float64", func(b *testing.B) {
			for b.Loop() {
				if err := e.oracle(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
