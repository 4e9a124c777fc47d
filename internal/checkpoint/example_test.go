package checkpoint_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/posttrain/posttrain/internal/checkpoint"
)

// toyTrainer stands in for a trainer: one weight, a data cursor and an RNG whose state must all
// survive a checkpoint for a resumed run to match an uninterrupted one.
type toyTrainer struct {
	w    float64
	rng  uint64 // xorshift state
	data []float64
	pos  checkpoint.DataPosition
	step int
}

func (t *toyTrainer) train(steps int) {
	for range steps {
		t.rng ^= t.rng << 13
		t.rng ^= t.rng >> 7
		t.rng ^= t.rng << 17
		x := t.data[t.pos.Offset] + float64(t.rng%1000)/1e4 // "sampling noise"
		t.w -= 0.1 * (t.w - x)
		if t.pos.Offset++; t.pos.Offset == len(t.data) {
			t.pos = checkpoint.DataPosition{Epoch: t.pos.Epoch + 1}
		}
		t.step++
	}
}

func (t *toyTrainer) save(out string) (string, error) {
	st := &checkpoint.State{GlobalStep: t.step, Data: t.pos, RNG: map[string][]uint64{"sampler": {t.rng}}}
	return checkpoint.Save(out, st, map[string]checkpoint.WriteFunc{
		"model.bin": func(path string) error {
			return os.WriteFile(path, binary.LittleEndian.AppendUint64(nil, math.Float64bits(t.w)), 0o644)
		},
	}, 2)
}

func loadToy(dir string, data []float64) (*toyTrainer, error) {
	st, err := checkpoint.Load(dir)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "model.bin"))
	if err != nil {
		return nil, err
	}
	return &toyTrainer{w: math.Float64frombits(binary.LittleEndian.Uint64(b)), rng: st.RNG["sampler"][0],
		data: data, pos: st.Data, step: st.GlobalStep}, nil
}

// A run interrupted after 3 steps and resumed with --resume ends bit-identical to a straight run.
func TestResume_MatchesUninterrupted(t *testing.T) {
	data := []float64{1, 2, 3, 4, 5}
	straight := &toyTrainer{rng: 42, data: data}
	straight.train(7)

	out := t.TempDir()
	first := &toyTrainer{rng: 42, data: data}
	first.train(3)
	if _, err := first.save(out); err != nil {
		t.Fatal(err)
	}
	dir, err := checkpoint.ResumeDir(out, true, "")
	if err != nil {
		t.Fatal(err)
	}
	resumed, err := loadToy(dir, data)
	if err != nil {
		t.Fatal(err)
	}
	resumed.train(4)
	if resumed.w != straight.w || resumed.rng != straight.rng || resumed.pos != straight.pos {
		t.Errorf("resumed (w %v, rng %d, pos %+v) ≠ straight (w %v, rng %d, pos %+v)",
			resumed.w, resumed.rng, resumed.pos, straight.w, straight.rng, straight.pos)
	}
}

func TestWriteFiles_FinalModel(t *testing.T) {
	out := t.TempDir()
	write := func(s string) checkpoint.WriteFunc {
		return func(path string) error { return os.WriteFile(path, []byte(s), 0o644) }
	}
	for _, v := range []string{"v1", "v2"} {
		err := checkpoint.WriteFiles(out, map[string]checkpoint.WriteFunc{"model.safetensors": write(v), "config.json": write("{}")})
		if err != nil {
			t.Fatal(err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "model.safetensors")); string(b) != "v2" {
		t.Errorf("got %q, want v2", b)
	}
	err := checkpoint.WriteFiles(out, map[string]checkpoint.WriteFunc{
		"model.safetensors": func(string) error { return fmt.Errorf("disk full") },
	})
	if b, _ := os.ReadFile(filepath.Join(out, "model.safetensors")); err == nil || string(b) != "v2" {
		t.Errorf("failed write: err %v, file %q (want the previous v2 kept)", err, b)
	}
	if entries, _ := os.ReadDir(out); len(entries) != 2 {
		t.Errorf("left behind: %v", entries)
	}
}
