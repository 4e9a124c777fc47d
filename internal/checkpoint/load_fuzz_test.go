package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzLoad checks that no trainer_state.json makes Load panic, and that a state it accepts
// lists only files that exist. Seeds: a state as Save writes it (indented, log lines, RNG words,
// trainer extras, listed files) and edge cases.
func FuzzLoad(f *testing.F) {
	best := 0.5
	saved, err := json.MarshalIndent(&State{
		GlobalStep: 6, Epoch: 1.5, MaxSteps: 10, NumTrainEpochs: 3, LoggingSteps: 1, SaveSteps: 2,
		TrainBatchSize: 4, NumInputTokensSeen: 1234, BestMetric: &best,
		LogHistory: []json.RawMessage{json.RawMessage(`{"step":1,"loss":"NaN"}`), json.RawMessage(`{"step":2,"loss":0.5}`)},
		Data:       DataPosition{Epoch: 1, Offset: 12},
		RNG:        map[string][]uint64{"data": {1, 2, 1 << 63}},
		Extra:      map[string]json.RawMessage{"grpo": json.RawMessage(`{"buffered":false}`)},
		Files:      []string{"optimizer.safetensors"},
	}, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(saved)
	f.Add([]byte(`{"global_step":99}`))
	f.Add([]byte(`{"global_step":-1,"files":["missing.safetensors","../x",""],"log_history":[1,"a",null]}`))
	f.Add([]byte(`{"rng_state":{"data":[-1]},"extra":{"x":null},"best_metric":null}`))
	f.Add([]byte(`{"data_position":{"epoch":1e99}}`))
	f.Add([]byte(`null`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, StateName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "optimizer.safetensors"), []byte("opt"), 0o644); err != nil {
			t.Fatal(err)
		}
		st, err := Load(dir)
		if err != nil {
			if st != nil {
				t.Fatalf("Load returned a state with error %v", err)
			}
			return
		}
		for _, name := range st.Files {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Fatalf("accepted a state listing missing file %q", name)
			}
		}
		if _, err := json.Marshal(st); err != nil {
			t.Fatalf("accepted state does not marshal back: %v", err)
		}
	})
}
