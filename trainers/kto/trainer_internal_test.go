package kto

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"

	"github.com/posttrain/posttrain/models/encode"
	"github.com/posttrain/posttrain/trainers/engine/loop"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
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
	cfg := DefaultConfig()
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

// logitSum is Σ over the real positions and the vocabulary of the full logits [1,S,V] of row r
// under m's current weights, in float64 on the host.
func logitSum(t *testing.T, b backends.Backend, m *trainable.Model, r encode.Encoded) float64 {
	t.Helper()
	z, _ := looptest.FullLogits(t, b, m, trainable.EncodedRows([]encode.Encoded{r}).Inputs())
	sum := 0.0
	for _, x := range z[:len(r.IDs)*m.Config.VocabSize] { // the row's own positions, not the padding
		sum += x
	}
	return sum
}

// TRL's KTO logits/chosen (logits/rejected) is the sum of each chosen (rejected) row's logits over
// its positions and the vocabulary, over their count; at step 1 it is computed here from the full
// logits at the starting weights, for both loss types.
func TestKTO_LogitsMetricsAtStepOne(t *testing.T) {
	dir := looptest.Model(t)
	b := looptest.Backend(t)
	var rows string
	for i := range 8 {
		rows += fmt.Sprintf(`{"prompt": "%d times %d is ", "completion": "%d", "label": %v}`+"\n", i, i+3, i*(i+3), i%3 != 0)
	}
	path := filepath.Join(t.TempDir(), "kto.jsonl")
	if err := os.WriteFile(path, []byte(rows), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, lossType := range []string{"kto", "apo_zero_unpaired"} {
		m := looptest.Load(t, dir, false)
		cfg := DefaultConfig()
		cfg.LossType = lossType
		looptest.Common(t, &cfg.Training, 1e-3, 4, 1, 1)
		tr, err := New(b, m, looptest.Read(t, path), cfg)
		if err != nil {
			t.Fatal(err)
		}
		start := looptest.Load(t, dir, false)
		var sum [2]float64
		var n [2]int
		for i := range 4 { // step 1's rows: KTO trains in the dataset's order (Sequential)
			k := 1
			if tr.desirable[i] {
				k = 0
			}
			sum[k] += logitSum(t, b, start, tr.rows[i])
			n[k]++
		}
		if n[0] == 0 || n[1] == 0 {
			t.Fatalf("step 1 has %d desirable and %d undesirable rows; the test needs both", n[0], n[1])
		}
		recs := looptest.Train(t, m, tr, loop.Options{Config: cfg, Backend: b})
		got := recs[0].Metrics
		for k, split := range []string{"chosen", "rejected"} {
			want := sum[k] / float64(n[k])
			if g := got["logits/"+split]; math.Abs(g-want) > 1e-6*math.Max(1, math.Abs(want)) {
				t.Errorf("%s: logits/%s = %.7f, want %.7f (%d rows)", lossType, split, g, want, n[k])
			}
		}
		t.Logf("%s step 1: logits/chosen %.5f, logits/rejected %.5f", lossType, got["logits/chosen"], got["logits/rejected"])
	}
}
