package generate

import (
	"math"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/internal/backend"
)

var (
	backendOnce sync.Once
	testBackend backends.Backend
)

func testBackendOrSkip(t testing.TB) backends.Backend {
	t.Helper()
	backendOnce.Do(func() { testBackend = backend.MustNew(backend.Default) })
	return testBackend
}

// logSumExp is log Σ exp(x) computed stably.
func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = max(m, v)
	}
	if math.IsInf(m, 0) || math.IsNaN(m) {
		return m
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

func TestBuckets(t *testing.T) {
	for _, c := range [][2]int{{1, 8}, {8, 8}, {9, 16}, {200, 256}, {256, 256}, {257, 384}, {1000, 1024}, {1025, 1152}} {
		if got := BucketLen(c[0]); got != c[1] {
			t.Errorf("BucketLen(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	for _, c := range [][2]int{{1, 1}, {2, 2}, {3, 4}, {5, 8}, {16, 16}} {
		if got := bucketRows(c[0]); got != c[1] {
			t.Errorf("bucketRows(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}
