package generate

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/internal/named"
)

// BenchmarkSample draws one token for each of 8 rows of Qwen2.5's 151,936 logits: in the graph
// (sampleGraph: greedy, temperature, top-p 0.9, top-k 50 + top-p 0.9), and, side by side, the
// host reference the graph replaced at temperature 1 (copy the [8,V] logits out, then per row a
// float64 log-sum-exp and an inverse-CDF draw).
func BenchmarkSample(b *testing.B) {
	const rows, vocab = 8, 151936
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([][]float32, rows)
	for r := range logits {
		logits[r] = make([]float32, vocab)
		for v := range logits[r] {
			logits[r][v] = float32(rng.NormFloat64() * 3)
		}
	}
	lt := tensors.FromValue(logits)
	for _, c := range []struct {
		name string
		opts SampleOptions
	}{{"greedy", SampleOptions{}}, {"temperature", SampleOptions{Temperature: 1}},
		{"top-p", SampleOptions{Temperature: 1, TopP: 0.9}}, {"top-k+top-p", SampleOptions{Temperature: 1, TopK: 50, TopP: 0.9}}} {
		b.Run("graph/"+c.name, func(b *testing.B) {
			mode := c.opts.mode(vocab)
			var sig named.Signature
			e, err := NewExec(backend.SharedForTests(), drawGraph(&sig, mode))
			if err != nil {
				b.Fatal(err)
			}
			defer e.Finalize()
			args, err := sig.Args(named.Of[any](drawInputs[any]{Logits: lt, Sample: sampleParams(c.opts, 0, 0, 1, rows, vocab)}))
			if err != nil {
				b.Fatal(err)
			}
			e.MustExec(args...) // compile
			for b.Loop() {
				e.MustExec(args...)
			}
		})
	}
	b.Run("host/temperature", func(b *testing.B) {
		e, err := NewExec(backend.SharedForTests(), func(x *Node) *Node { return Neg(Neg(x)) })
		if err != nil {
			b.Fatal(err)
		}
		defer e.Finalize()
		x := make([]float64, vocab)
		for b.Loop() {
			flat := tensors.MustCopyFlatData[float32](e.MustExec(lt)[0])
			for r := range rows {
				for v, l := range flat[r*vocab : (r+1)*vocab] {
					x[v] = float64(l)
				}
				lse, u, cum := logSumExp(x), rng.Float64(), 0.0
				for _, xv := range x {
					if cum += math.Exp(xv - lse); u < cum {
						break
					}
				}
			}
		}
	})
}
