package generate

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// What the tests of package generate_test (which load the qwen2-tiny fixture through decoder.Arch;
// qwen2 imports this package) reach inside the Generator by.

var LogSumExp = logSumExp

// Resolve is the concrete update Generate uses for u on backend b.
func (u KVUpdate) Resolve(b backends.Backend) KVUpdate { return u.resolve(b) }

// newCachedStepper is the stepper Generate uses, donating its caches unless keep.
func newCachedStepper(g *Generator, opts Options, keep bool) *cachedStepper {
	g.spec = g.model.Spec()
	return &cachedStepper{g: g, how: g.KVUpdate.resolve(g.backend), mode: opts.mode(g.spec.VocabSize), keepCaches: keep}
}

// GenerateKeepingCaches is Generate passing the caches to each decode step as plain tensors,
// kept alive through the step and freed after it, instead of donating them (the path before
// donation).
func GenerateKeepingCaches(g *Generator, prompts [][]int32, opts Options) ([]Generation, error) {
	return g.run(prompts, opts, newCachedStepper(g, opts, true))
}

// DonationCheck sees each decode step of GenerateProbingDonation between donating the caches and
// running the step: before, the caches the stepper held; args, the step's cache arguments; after,
// the stepper's caches once donated.
type DonationCheck func(before []*tensors.Tensor, args []any, after []*tensors.Tensor)

// GenerateProbingDonation is Generate with check called at every decode step.
func GenerateProbingDonation(g *Generator, prompts [][]int32, opts Options, check DonationCheck) ([]Generation, error) {
	return g.run(prompts, opts, &donationProbe{cachedStepper: newCachedStepper(g, opts, false), check: check})
}

// donationProbe is the cached stepper with check between donating the caches and running the step.
type donationProbe struct {
	*cachedStepper
	check DonationCheck
}

func (p *donationProbe) next(tok []int32, slot, n int, sample sampleInputs[any]) ([]int32, []float32, error) {
	before := firstPieces(p.caches)
	caches, err := p.cacheArgs()
	if err != nil {
		return nil, nil, err
	}
	p.check(before, caches, firstPieces(p.caches))
	return p.decode(caches, tok, slot, n, sample)
}

// firstPieces is each cache's piece on the first device (the whole cache on one device), nil
// where the cache was donated.
func firstPieces(caches [][]*tensors.Tensor) []*tensors.Tensor {
	out := make([]*tensors.Tensor, len(caches))
	for i, c := range caches {
		if c != nil {
			out[i] = c[0]
		}
	}
	return out
}
