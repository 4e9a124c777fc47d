package generate

import (
	"slices"
	"testing"

	"github.com/posttrain/posttrain/internal/backend"
)

func TestBuckets(t *testing.T) {
	for _, c := range [][2]int{{1, 8}, {8, 8}, {9, 16}, {200, 256}, {256, 256}, {257, 384}, {1000, 1024}, {1025, 1152}} {
		if got := BucketLen(c[0]); got != c[1] {
			t.Errorf("BucketLen(%d) = %d, want %d", c[0], got, c[1])
		}
	}
	pureGo := backend.MustNew(backend.PureGo)
	for _, c := range [][3]int{{1, 8, 8}, {8, 8, 8}, {9, 16, 16}, {20, 32, 32}, {33, 64, 64}, {65, 128, 96}, {200, 256, 224}, {256, 256, 256}, {257, 384, 384}} {
		if got := PromptBucket(nil, c[0]); got != c[1] {
			t.Errorf("PromptBucket(compiling backend, %d) = %d, want %d", c[0], got, c[1])
		}
		if got := PromptBucket(pureGo, c[0]); got != c[2] {
			t.Errorf("PromptBucket(pure Go, %d) = %d, want %d", c[0], got, c[2])
		}
	}
	for _, c := range [][2]int{{1, 1}, {2, 2}, {3, 4}, {5, 8}, {16, 16}} {
		if got := bucketRows(c[0]); got != c[1] {
			t.Errorf("bucketRows(%d) = %d, want %d", c[0], got, c[1])
		}
	}
}

// Left padding puts every prompt's last token in the last column; the padding rows beyond the
// prompts hold one token; positions count the real tokens from 0, pads at 1 (HF's generate()).
func TestLeftPad_Positions(t *testing.T) {
	ids, mask := leftPad([][]int32{{5, 6, 7}, {9}}, 4, 4)
	wantIDs := [][]int32{{0, 5, 6, 7}, {0, 0, 0, 9}, {0, 0, 0, 0}, {0, 0, 0, 0}}
	wantMask := [][]int32{{0, 1, 1, 1}, {0, 0, 0, 1}, {0, 0, 0, 1}, {0, 0, 0, 1}}
	wantPos := [][]int32{{1, 0, 1, 2}, {1, 1, 1, 0}, {1, 1, 1, 0}, {1, 1, 1, 0}}
	if !slices.EqualFunc(ids, wantIDs, slices.Equal) || !slices.EqualFunc(mask, wantMask, slices.Equal) {
		t.Errorf("leftPad: ids %v mask %v, want %v %v", ids, mask, wantIDs, wantMask)
	}
	if got := PositionIDs(mask); !slices.EqualFunc(got, wantPos, slices.Equal) {
		t.Errorf("PositionIDs(%v) = %v, want %v", mask, got, wantPos)
	}
}
