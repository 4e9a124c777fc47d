package loop

import "math/rand/v2"

// Order is the order of the examples in pass epoch: a permutation of [0, n) drawn from the seed
// and the pass number, so a resumed run that knows (epoch, offset) sees the same examples.
func Order(n, seed, epoch int) []int {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(epoch)+0x5eed))
	return rng.Perm(n)
}
