package kto

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/posttrain/posttrain/trainers/config"
	"github.com/posttrain/posttrain/trainers/loop/looptest"
)

// The KL rows pair each prompt with the completion of the previous row of its chunk of
// per_device_train_batch_size rows (the first with the chunk's last), as TRL's _get_kl_dataset;
// a last chunk of one row keeps its own completion, as in TRL.
func TestNew_KLRowsShiftByOneInEachChunk(t *testing.T) {
	m := looptest.Load(t, looptest.Model(t), false)
	var rows string
	for i := range 5 {
		rows += fmt.Sprintf(`{"prompt": "q%d ", "completion": "a%d", "label": %v}`+"\n", i, i, i%2 == 0)
	}
	path := filepath.Join(t.TempDir(), "kto.jsonl")
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultKTO()
	cfg.PerDeviceTrainBatchSize = 2
	tr, err := New(looptest.Backend(t), m, looptest.Read(t, path), cfg)
	if err != nil {
		t.Fatal(err)
	}
	source := []int{1, 0, 3, 2, 4} // chunks [0 1] [2 3] [4]
	for i, j := range source {
		kl, row, other := tr.kl[i], tr.rows[i], tr.rows[j]
		if !slices.Equal(kl.IDs[:kl.Start], row.IDs[:row.Start]) || !slices.Equal(kl.IDs[kl.Start:], other.IDs[other.Start:]) {
			t.Errorf("KL row %d = %v, want prompt %d + completion %d", i, kl, i, j)
		}
	}
}
